#!/usr/bin/env bash
# Installs the tools the meshperf lab and agents run (Debian/Ubuntu, apt-get),
# only if one of them is missing. Idempotent: run it as often as you like.
set -euo pipefail

# ip, bridge and iptables live in sbin, which a non-root PATH may lack.
export PATH="${PATH}:/usr/local/sbin:/usr/sbin:/sbin"

tools=(iperf3 qperf ping iptables iptables-save ip tc bridge curl nsenter ab)
packages=(iperf3 qperf iputils-ping iptables iproute2 curl util-linux procps apache2-utils)

missing=()
for t in "${tools[@]}"; do
	if ! command -v "$t" >/dev/null 2>&1; then
		missing+=("$t")
	fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
	echo "install-deps: all tools present: ${tools[*]}"
	exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
	echo "install-deps: installing needs root; run: sudo $0" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: apt-get not found; install these packages by hand: ${packages[*]}" >&2
	exit 1
fi

apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"

still=()
for t in "${tools[@]}"; do
	command -v "$t" >/dev/null 2>&1 || still+=("$t")
done
if [[ ${#still[@]} -gt 0 ]]; then
	echo "install-deps: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
echo "install-deps: installed ${packages[*]}; all tools present"
