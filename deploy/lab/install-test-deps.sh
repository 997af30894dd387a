#!/usr/bin/env bash
# Installs what the tests need beyond the measuring tools (Debian, apt-get),
# only if one of them is missing: headless Chromium for the web UI's browser
# tests, Prometheus and promtool for the alert rules and the dashboard's
# queries, VictoriaMetrics as a real remote-write receiver, mmdebstrap and
# umoci for the OCI image (deploy/image, make image-oci). Idempotent.
set -euo pipefail

tools=(chromium prometheus promtool victoria-metrics mmdebstrap umoci)
packages=(chromium prometheus victoria-metrics fonts-liberation mmdebstrap umoci)

# shellcheck source=deploy/lab/ensure-tools.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/ensure-tools.sh"
# No recommends: prometheus would bring node-exporter, chromium a desktop,
# mmdebstrap a set of optional helpers.
ensure_tools install-test-deps tools packages --no-install-recommends
