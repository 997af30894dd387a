#!/usr/bin/env bash
# Measures the interference-free schedule on a 6-node lab (as root): a full
# iperf3 TCP mesh, then one line
#   rounds=R optimal=O wall_s=W per_test_s=T ratio=X     (ratio = W / (O x T))
# R == O: the fewest rounds possible; ratio <= 1.10: little time lost between
# tests. Usage: bench/rounds.sh [extra meshlab bench-rounds flags]
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/lab/install-deps.sh >/dev/null
go build -o bin/ ./cmd/...
exec bin/meshlab bench-rounds --bin bin --nodes 6 "$@"
