#!/usr/bin/env bash
# Installs what the tests need beyond the measuring tools (Debian, apt-get),
# only if one of them is missing: headless Chromium for the web UI's browser
# tests, Prometheus and promtool for the alert rules and the dashboard's
# queries, VictoriaMetrics as a real remote-write receiver, mmdebstrap and
# umoci for the OCI image (deploy/image, make image-oci). Idempotent.
set -euo pipefail

tools=(chromium prometheus promtool victoria-metrics mmdebstrap umoci)
packages=(chromium prometheus victoria-metrics fonts-liberation mmdebstrap umoci)

missing=()
for t in "${tools[@]}"; do
	command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	echo "install-test-deps: all present: ${tools[*]}"
	exit 0
fi
echo "install-test-deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
	echo "install-test-deps: installing needs root; run: sudo $0" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-test-deps: apt-get not found; install these packages by hand: ${packages[*]}" >&2
	exit 1
fi
apt-get update
# No recommends: prometheus would bring node-exporter, chromium a desktop,
# mmdebstrap a set of optional helpers.
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
still=()
for t in "${tools[@]}"; do
	command -v "$t" >/dev/null 2>&1 || still+=("$t")
done
if [[ ${#still[@]} -gt 0 ]]; then
	echo "install-test-deps: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
echo "install-test-deps: installed ${packages[*]}"
