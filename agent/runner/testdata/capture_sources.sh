#!/usr/bin/env bash
# capture_sources.sh records the real ping cases of issue 11 (replies from
# another address, local send failures) into testdata/ping/ (format:
# README.md). Run it as root from agent/runner: `bash
# testdata/capture_sources.sh`. It needs iputils ping, util-linux unshare,
# iptables and nft.
#
# Network rule: everything runs in a fresh network namespace of its own
# (unshare -n) with only lo up; ping targets 127.0.0.1; no packet leaves
# the namespace, which dies with the script's child.
#   foreign_*: nft rewrites the source of echo replies on output to
#     127.0.0.9 (all, or every second one), so ping gets its own replies
#     "from" another address and flags them (DIFFERENT ADDRESS!).
#   foreign_dup_all: as foreign_all, plus nft `dup` of each reply: every
#     icmp_seq answered twice, both copies from 127.0.0.9.
#   send_failed_*: iptables REJECT of echo requests on OUTPUT (all, or
#     every second one): sendmsg(2) fails with EPERM and ping prints
#     "ping: sendmsg: Operation not permitted" on stderr.
#   route_gone_*: ping targets 10.200.0.1, an address on this namespace's
#     lo, which is taken away during the run (and, for _some, put back):
#     with no route left sendmsg(2) fails with ENETUNREACH, "ping:
#     sendmsg: Network is unreachable", as when a CNI withdraws a route.
set -euo pipefail
export LC_ALL=C
dir=$(cd "$(dirname "$0")" && pwd)

if [[ ${1-} != inner ]]; then
	exec timeout 120 unshare -n "$0" inner
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ip link set lo up
spec3='{"test":"TEST_PING","ping":{"count":3,"interval":"0.200s","payloadSizeBytes":56}}'
spec4='{"test":"TEST_PING","ping":{"count":4,"interval":"0.200s","payloadSizeBytes":56}}'
spec6='{"test":"TEST_PING","ping":{"count":6,"interval":"0.200s","payloadSizeBytes":56}}'

# cap CASE SPEC NOTE COUNT [TARGET [DURING]]: runs ping -c COUNT against
# TARGET (127.0.0.1) and writes testdata/ping/CASE.txt; DURING, a
# function, runs while ping does.
cap() {
	local name=$1 spec=$2 note=$3 count=$4 target=${5:-127.0.0.1} during=${6:-} rc=0
	local argv=(ping -n -c "$count" -i 0.2 -s 56 -W 1 "$target")
	timeout -s KILL 10 "${argv[@]}" >"$tmp/out" 2>"$tmp/err" &
	local pid=$!
	if [[ -n $during ]]; then "$during"; fi
	wait "$pid" || rc=$?
	{
		echo "# Captured by testdata/capture_sources.sh on $(date -u +%Y-%m-%d); format in testdata/README.md."
		echo "argv: ${argv[*]}"
		echo "exit: $rc"
		echo "spec: $spec"
		echo "netns: ran in a fresh namespace with only lo (see capture_sources.sh)"
		echo "note: $note"
		echo "==> stdout <=="
		cat "$tmp/out"
		if [[ -n $(tail -c1 "$tmp/out") ]]; then echo; fi
		echo "==> stderr <=="
		cat "$tmp/err"
		if [[ -n $(tail -c1 "$tmp/err") ]]; then echo; fi
	} >"$dir/ping/$name.txt"
	echo "captured ping/$name (exit $rc)"
}

iptables -A OUTPUT -p icmp --icmp-type echo-request -j REJECT
cap send_failed_all "$spec3" "iptables REJECT of every echo request on OUTPUT: sendmsg fails with EPERM" 3
iptables -F OUTPUT
iptables -A OUTPUT -p icmp --icmp-type echo-request -m statistic --mode nth --every 2 --packet 0 -j REJECT
cap send_failed_some "$spec6" "iptables REJECT of every second echo request on OUTPUT: 3 of 6 sends fail with EPERM" 6
iptables -F OUTPUT

nft add table ip rtcap
nft add chain ip rtcap out '{ type filter hook output priority 0; }'
nft add rule ip rtcap out icmp type echo-reply ip saddr set 127.0.0.9
cap foreign_all "$spec3" "nft rewrites the source of every echo reply to 127.0.0.9: no reply from the target" 3
nft add rule ip rtcap out icmp type echo-reply dup to 127.0.0.1
cap foreign_dup_all "$spec4" "nft rewrites the source of every echo reply to 127.0.0.9 and duplicates it: every reply twice, none from the target" 4
nft flush chain ip rtcap out
nft add rule ip rtcap out icmp type echo-reply numgen inc mod 2 0 ip saddr set 127.0.0.9
cap foreign_some "$spec6" "nft rewrites the source of every second echo reply to 127.0.0.9: 3 of 6 from the target" 6
nft delete table ip rtcap

# The route goes away after 2 echo requests (and, for _some, comes back
# after 2 more): the sends in between fail with ENETUNREACH.
ip addr add 10.200.0.1/32 dev lo
gone() { sleep 0.3; ip addr del 10.200.0.1/32 dev lo; }
gone_back() { gone; sleep 0.4; ip addr add 10.200.0.1/32 dev lo; }
cap route_gone_some "$spec6" "10.200.0.1 (on lo) removed after 2 echo requests and put back 2 later: those sends fail with ENETUNREACH" 6 10.200.0.1 gone_back
cap route_gone_all "$spec6" "10.200.0.1 (on lo) removed after 2 echo requests: the other 4 sends fail with ENETUNREACH" 6 10.200.0.1 gone
