# shellcheck shell=bash
# ensure_tools, sourced by install-deps.sh and install-test-deps.sh: the one
# check-then-install routine of both (Debian/Ubuntu, apt-get).

# ensure_tools NAME TOOLS PACKAGES [APT_OPTION...] checks that every
# program of the array named TOOLS is on PATH; if one is missing it installs
# the packages of the array named PACKAGES with apt-get (needs root), then
# checks again. NAME prefixes its messages. It returns 0 when every
# program is there, 1 otherwise (with the reason on stderr). Its locals
# start with _et_, so that TOOLS and PACKAGES may have any other names.
ensure_tools() {
	local _et_name=$1
	local -n _et_tools=$2 _et_packages=$3
	shift 3
	local _et_missing=() _et_still=() _et_t
	for _et_t in "${_et_tools[@]}"; do
		command -v "$_et_t" >/dev/null 2>&1 || _et_missing+=("$_et_t")
	done
	if [[ ${#_et_missing[@]} -eq 0 ]]; then
		echo "$_et_name: all tools present: ${_et_tools[*]}"
		return 0
	fi
	echo "$_et_name: missing: ${_et_missing[*]}"
	if [[ $(id -u) -ne 0 ]]; then
		echo "$_et_name: installing needs root; run: sudo $0" >&2
		return 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "$_et_name: apt-get not found; install these packages by hand: ${_et_packages[*]}" >&2
		return 1
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" "${_et_packages[@]}"
	for _et_t in "${_et_tools[@]}"; do
		command -v "$_et_t" >/dev/null 2>&1 || _et_still+=("$_et_t")
	done
	if [[ ${#_et_still[@]} -gt 0 ]]; then
		echo "$_et_name: still missing after apt-get install: ${_et_still[*]}" >&2
		return 1
	fi
	echo "$_et_name: installed ${_et_packages[*]}; all tools present"
}
