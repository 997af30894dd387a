#!/usr/bin/env bash
# Installs the tools the meshperf lab and agents run (Debian/Ubuntu, apt-get),
# only if one of them is missing. Idempotent: run it as often as you like.
# The programs and their packages are tools.txt's, the list the lab's own
# check (deploy/lab, checkPrograms) reads too. --list prints that list as
# "PROGRAM PACKAGE" lines and exits (deploy/lab's tools_test.go reads it).
set -euo pipefail

# ip, bridge and iptables live in sbin, which a non-root PATH may lack.
export PATH="${PATH}:/usr/local/sbin:/usr/sbin:/sbin"

# This script's own directory, also when it is run through a symlink.
here="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
list="$here/tools.txt"
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

# shellcheck source=deploy/lab/ensure-tools.sh
source "$here/ensure-tools.sh"
ensure_tools install-deps tools packages
