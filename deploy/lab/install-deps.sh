#!/usr/bin/env bash
# Installs the tools the meshperf lab and agents run (Debian/Ubuntu, apt-get),
# only if one of them is missing. Idempotent: run it as often as you like.
# The programs and their packages are tools.txt's, the list the lab's own
# check (deploy/lab, checkTools) reads too. --list prints that list as
# "PROGRAM PACKAGE" lines and exits (deploy/lab's tools_test.go reads it).
set -euo pipefail

# ip, bridge and iptables live in sbin, which a non-root PATH may lack.
export PATH="${PATH}:/usr/local/sbin:/usr/sbin:/sbin"

list="$(dirname "$0")/tools.txt"
tools=()
packages=()
while read -r tool package _; do
	[[ -z "$tool" || "$tool" == \#* ]] && continue
	tools+=("$tool")
	[[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
	if [[ "${1:-}" == "--list" ]]; then
		echo "$tool $package"
	fi
done <"$list"
if [[ ${#tools[@]} -eq 0 ]]; then
	echo "install-deps: $list lists no program" >&2
	exit 1
fi
if [[ "${1:-}" == "--list" ]]; then
	exit 0
fi

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
