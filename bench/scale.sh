#!/usr/bin/env bash
# Measures the coordinator at cluster scale against a simulated fleet of
# agents (deploy/fleet) that speak the real agent protocol over gRPC on
# loopback: a real coordinator process, and in this process the fleet, each
# agent following its probe plan and reporting every peer, path and kind
# (ICMP and TCP over host-host and pod-pod) with plausible figures, gossip
# views on. One line per case:
#   nodes=N interval=I report=R mode=M coverage=C plan_latency_s=L coord_cpu_pct=P coord_rss_mb=M ...
# Cases: 300 nodes probed and reported every 10 s; 1,000 nodes probed every
# 10 s and reported every 60 s; 5,000 nodes with plans only. Nothing leaves
# loopback. Usage: bench/scale.sh [extra meshlab bench-scale flags]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/...
bin/meshlab bench-scale --bin bin --nodes 300 --interval 10s --report 10s "$@"
bin/meshlab bench-scale --bin bin --nodes 1000 --interval 10s --report 60s "$@"
bin/meshlab bench-scale --bin bin --nodes 5000 --plans-only "$@"
