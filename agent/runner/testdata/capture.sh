#!/usr/bin/env bash
# capture.sh records real outputs of ping, qperf, iperf3 and curl into
# testdata/<tool>/<case>.txt (format: README.md). Run it as root from
# agent/runner: `bash testdata/capture.sh`. It needs iputils ping, qperf,
# iperf3, curl, python3, iproute2 and iptables.
#
# Network rule: traffic goes only to 127.0.0.1 in the root namespace, or to
# addresses inside throwaway namespaces named rtcap-<random>, which have no
# link to the root namespace and no route out; they are deleted on exit.
# Servers run under `timeout`, are tracked by PID and killed on exit.
set -euo pipefail
export LC_ALL=C

dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
ns=rtcap-$RANDOM
nsb=$ns-b
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$nsb" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

QP=30765 QD=30766 IP3=30801 HP=30811 SILENT=30812 EMPTY=30813 FREE=30899
for p in $QP $QD $IP3 $HP $SILENT $EMPTY $FREE; do
	if ss -Hltnu "sport = :$p" | grep -q .; then
		echo "port $p is in use" >&2
		exit 1
	fi
done

# Namespaces: $ns has lo (with 10.250.1.1/32) and rtv0 10.250.0.1/24; $nsb
# has rtv1 10.250.0.2/24. Nothing else: 192.0.2.0/24 and the rest have no
# route, 10.250.0.9 does not exist (ARP fails: host unreachable).
ip netns add "$ns"
ip netns add "$nsb"
ip -n "$ns" link set lo up
ip -n "$nsb" link set lo up
ip -n "$ns" addr add 10.250.1.1/32 dev lo
ip link add rtv0 netns "$ns" type veth peer name rtv1 netns "$nsb"
ip -n "$ns" addr add 10.250.0.1/24 dev rtv0
ip -n "$nsb" addr add 10.250.0.2/24 dev rtv1
ip -n "$ns" link set rtv0 up
ip -n "$nsb" link set rtv1 up

# cap TOOL CASE SPEC NOTE NETNS KILL_AFTER ARGV...: runs ARGV (in NETNS if not
# empty) and writes testdata/TOOL/CASE.txt. KILL_AFTER is the SIGKILL
# timeout in seconds (a kill is recorded as exit -1 with error: deadline).
cap() {
	local tool=$1 name=$2 spec=$3 note=$4 netns=$5 kill=$6
	shift 6
	local rc=0 errline=""
	if [[ -n $netns ]]; then
		timeout -s KILL "$kill" ip netns exec "$netns" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	else
		timeout -s KILL "$kill" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	fi
	if [[ $rc -eq 137 ]]; then
		rc=-1
		errline="error: deadline"
	fi
	mkdir -p "$dir/$tool"
	{
		echo "# Captured by testdata/capture.sh on $(date -u +%Y-%m-%d); format in testdata/README.md."
		echo "argv: $*"
		echo "exit: $rc"
		echo "spec: $spec"
		if [[ -n $netns ]]; then echo "netns: ran in a throwaway namespace (see capture.sh)"; fi
		echo "note: $note"
		if [[ -n $errline ]]; then echo "$errline"; fi
		echo "==> stdout <=="
		cat "$tmp/out"
		if [[ -n $(tail -c1 "$tmp/out") ]]; then echo; fi
		echo "==> stderr <=="
		cat "$tmp/err"
		if [[ -n $(tail -c1 "$tmp/err") ]]; then echo; fi
	} >"$dir/$tool/$name.txt"
	echo "captured $tool/$name (exit $rc)"
}

# waitport PORT [NETNS]: waits up to 10 s for a TCP listener on PORT.
waitport() {
	local i
	for i in $(seq 100); do
		if [[ -n ${2-} ]]; then
			ip netns exec "$2" ss -Hltn "sport = :$1" | grep -q . && return 0
		else
			ss -Hltn "sport = :$1" | grep -q . && return 0
		fi
		sleep 0.1
	done
	echo "nothing listens on port $1" >&2
	return 1
}

# bg PORT CMD...: starts a server in the background (bounded by timeout),
# records its PID for cleanup and waits until it listens on PORT.
bg() {
	local port=$1 i
	shift
	for i in $(seq 50); do # the previous one-off server may still be exiting
		ss -Hltn "sport = :$port" | grep -q . || break
		sleep 0.1
	done
	timeout 120 "$@" >/dev/null 2>&1 &
	pids+=($!)
	waitport "$port"
}

########## ping
pingspec() { echo "{\"test\":\"TEST_PING\",\"ping\":{\"count\":$1,\"interval\":\"${3-0.200s}\",\"payloadSizeBytes\":$2}}"; }
cap ping ok_loopback "$(pingspec 5 56)" "127.0.0.1 in the root namespace" "" 30 \
	ping -n -c 5 -i 0.2 -s 56 -W 1 127.0.0.1
cap ping ok_payload_1400 "$(pingspec 3 1400)" "127.0.0.1, 1400-byte payload" "" 30 \
	ping -n -c 3 -i 0.2 -s 1400 -W 1 127.0.0.1
cap ping ok_loopback_even "$(pingspec 4 56)" "127.0.0.1 in the root namespace, an even number of replies" "" 30 \
	ping -n -c 4 -i 0.2 -s 56 -W 1 127.0.0.1
ip netns exec "$nsb" iptables -t mangle -A POSTROUTING -p icmp --icmp-type echo-reply -m statistic --mode nth --every 2 --packet 0 -j TEE --gateway 10.250.0.1
cap ping duplicates "$(pingspec 5 56)" "every other reply of the peer duplicated (iptables TEE to the pinger)" "$ns" 30 \
	ping -n -c 5 -i 0.2 -s 56 -W 1 10.250.0.2
ip netns exec "$nsb" iptables -t mangle -F
ip netns exec "$ns" iptables -A INPUT -p icmp -m statistic --mode nth --every 3 --packet 0 -j DROP
cap ping partial_loss "$(pingspec 10 56)" "iptables statistic nth drop of ICMP in the namespace" "$ns" 30 \
	ping -n -c 10 -i 0.2 -s 56 -W 1 10.250.1.1
ip netns exec "$ns" iptables -F
ip netns exec "$nsb" iptables -A INPUT -p icmp -j DROP
cap ping all_lost "$(pingspec 3 56)" "peer drops all ICMP (iptables DROP)" "$ns" 30 \
	ping -n -c 3 -i 0.2 -s 56 -W 1 10.250.0.2
ip netns exec "$nsb" iptables -F
ip netns exec "$nsb" iptables -A INPUT -p icmp -j REJECT --reject-with icmp-admin-prohibited
cap ping filtered "$(pingspec 3 56)" "peer rejects ICMP with admin-prohibited" "$ns" 30 \
	ping -n -c 3 -i 0.2 -s 56 -W 1 10.250.0.2
ip netns exec "$nsb" iptables -F
cap ping host_unreachable "$(pingspec 3 56)" "10.250.0.9 is on the link but absent: ARP fails" "$ns" 30 \
	ping -n -c 3 -i 0.2 -s 56 -W 1 10.250.0.9
cap ping host_unreachable_errors "$(pingspec 5 56 1s)" "as host_unreachable, slower: ARP gives up while ping still runs" "$ns" 30 \
	ping -n -c 5 -i 1 -s 56 -W 1 10.250.0.9
cap ping network_unreachable "$(pingspec 3 56)" "no route to 192.0.2.1 in the namespace" "$ns" 30 \
	ping -n -c 3 -i 0.2 -s 56 -W 1 192.0.2.1
cap ping killed_deadline "$(pingspec 20 56)" "killed (SIGKILL) after 1 s, as the runner does at its deadline" "" 1 \
	ping -n -c 20 -i 0.2 -s 56 -W 1 127.0.0.1

########## qperf
qspec() { echo "{\"test\":\"$1\",\"qperf\":{\"duration\":\"1s\",\"msgSizeBytes\":[$2]}}"; }
bg $QP qperf -lp $QP
qserver=${pids[-1]}
cap qperf tcp_lat_ok "$(qspec TEST_QPERF_TCP_LAT '"1"')" "server qperf -lp $QP on 127.0.0.1" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1 127.0.0.1 tcp_lat
cap qperf tcp_bw_ok "$(qspec TEST_QPERF_TCP_BW '"65536"')" "server qperf -lp $QP on 127.0.0.1" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:65536 127.0.0.1 tcp_bw
cap qperf tcp_bw_1234567 "$(qspec TEST_QPERF_TCP_BW '"1234567"')" "a size qperf prints rounded (1.23 MB)" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1234567 127.0.0.1 tcp_bw
cap qperf udp_lat_ok "$(qspec TEST_QPERF_UDP_LAT '"1"')" "server qperf -lp $QP on 127.0.0.1" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1 127.0.0.1 udp_lat
cap qperf udp_bw_ok "$(qspec TEST_QPERF_UDP_BW '"32768"')" "server qperf -lp $QP on 127.0.0.1" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:32768 127.0.0.1 udp_bw
cap qperf tcp_bw_loop_sizes "$(qspec TEST_QPERF_TCP_BW '"64","512","4096"')" "one run with a geometric -oo loop: three blocks" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:64:4096:*8 127.0.0.1 tcp_bw
cap qperf tcp_lat_repeated_oo "$(qspec TEST_QPERF_TCP_LAT '"64","1024"')" "two -oo msg_size options: qperf keeps only the last" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:64 -oo msg_size:1024 127.0.0.1 tcp_lat
cap qperf udp_lat_oversize "$(qspec TEST_QPERF_UDP_LAT '"70000"')" "UDP message above 65507 bytes: send errors, latency 0" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:70000 127.0.0.1 udp_lat
bg $QD python3 -m http.server $QD --bind 127.0.0.1
cap qperf data_port_in_use "$(qspec TEST_QPERF_TCP_LAT '"1"')" "another program listens on the data port" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1 127.0.0.1 tcp_lat
kill "${pids[-1]}"
cap qperf killed_deadline "$(qspec TEST_QPERF_TCP_BW '"65536"')" "killed (SIGKILL) after 1 s of a 5 s run" "" 1 \
	qperf -lp $QP -ip $QD -t 5 -vv -oo msg_size:65536 127.0.0.1 tcp_bw
qpid=$(pgrep -P "$qserver" -x qperf || true)
if [[ -n $qpid ]]; then kill -STOP "$qpid"; fi
cap qperf server_stopped "$(qspec TEST_QPERF_TCP_LAT '"1"')" "server process stopped with SIGSTOP: connects, no answer" "" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1 127.0.0.1 tcp_lat
if [[ -n $qpid ]]; then kill -KILL "$qpid"; fi
cap qperf refused "$(qspec TEST_QPERF_TCP_LAT '"1"')" "nothing listens on 127.0.0.1:$FREE" "" 30 \
	qperf -lp $FREE -ip $QD -t 1 -vv -oo msg_size:1 127.0.0.1 tcp_lat
cap qperf network_unreachable "$(qspec TEST_QPERF_TCP_LAT '"1"')" "no route to 192.0.2.1 in the namespace" "$ns" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1 192.0.2.1 tcp_lat
ip netns exec "$nsb" iptables -A INPUT -p tcp --dport $QP -j DROP
cap qperf timeout_drop "$(qspec TEST_QPERF_TCP_BW '"65536"')" "peer drops the listen port (iptables DROP)" "$ns" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:65536 10.250.0.2 tcp_bw
ip netns exec "$nsb" iptables -F
# udp_lat_dropped: a qperf server in $nsb whose UDP data port drops
# everything: the client's first datagram is lost, and qperf 0.4.11's
# udp_lat waits in read(2) until the run ends, then prints latency 0.
timeout 60 ip netns exec "$nsb" qperf -lp $QP >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
ip netns exec "$nsb" iptables -A INPUT -p udp --dport $QD -j DROP
cap qperf udp_lat_dropped "$(qspec TEST_QPERF_UDP_LAT '"1"')" "peer drops UDP to the data port (iptables DROP): the first datagram is lost" "$ns" 30 \
	qperf -lp $QP -ip $QD -t 1 -vv -oo msg_size:1 10.250.0.2 udp_lat
ip netns exec "$nsb" iptables -F
kill "${pids[-1]}"

########## iperf3
i3spec() { echo "{\"test\":\"$1\",\"iperf3\":{\"duration\":\"1s\",\"parallelStreams\":$2${3-}}}"; }
bg $IP3 iperf3 -s -p $IP3 -1 --idle-timeout 60
cap iperf3 tcp_ok "$(i3spec TEST_IPERF3_TCP 1)" "server iperf3 -s -1 on 127.0.0.1" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 1 -P 1 --connect-timeout 3000
bg $IP3 iperf3 -s -p $IP3 -1 --idle-timeout 60
cap iperf3 tcp_p2_ok "$(i3spec TEST_IPERF3_TCP 2)" "two parallel streams" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 1 -P 2 --connect-timeout 3000
bg $IP3 iperf3 -s -p $IP3 -1 --idle-timeout 60
cap iperf3 tcp_len_ok "$(i3spec TEST_IPERF3_TCP 1 ',"blockSizeBytes":"16384"')" "-l 16384" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 1 -P 1 -l 16384 --connect-timeout 3000
bg $IP3 iperf3 -s -p $IP3 -1 --idle-timeout 60
cap iperf3 udp_ok "$(i3spec TEST_IPERF3_UDP 1 ',"udpTargetBps":"1000000000"')" "UDP at 1 Gbit/s on loopback" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 1 -P 1 -u -b 1000000000 --connect-timeout 3000
timeout 60 ip netns exec "$nsb" iperf3 -s -p $IP3 -1 --idle-timeout 30 >/dev/null 2>&1 &
pids+=($!)
waitport $IP3 "$nsb"
# --packet 5: the first datagrams (iperf3's UDP handshake) must pass.
ip netns exec "$nsb" iptables -A INPUT -p udp --dport $IP3 -m statistic --mode nth --every 10 --packet 5 -j DROP
cap iperf3 udp_loss "$(i3spec TEST_IPERF3_UDP 1 ',"udpTargetBps":"100000000"')" "peer drops every 10th UDP datagram" "$ns" 30 \
	iperf3 -c 10.250.0.2 -p $IP3 -J -i 0 -t 1 -P 1 -u -b 100000000 --connect-timeout 3000
ip netns exec "$nsb" iptables -F
bg $IP3 iperf3 -s -p $IP3 -1 --idle-timeout 60
timeout 20 iperf3 -c 127.0.0.1 -p $IP3 -t 3 >/dev/null 2>&1 &
pids+=($!)
sleep 0.7
cap iperf3 busy "$(i3spec TEST_IPERF3_TCP 1)" "another client is running a 3 s test on the server" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 1 -P 1 --connect-timeout 3000
wait "${pids[-1]}" || true
cap iperf3 refused "$(i3spec TEST_IPERF3_TCP 1)" "nothing listens on 127.0.0.1:$FREE" "" 30 \
	iperf3 -c 127.0.0.1 -p $FREE -J -i 0 -t 1 -P 1 --connect-timeout 3000
cap iperf3 network_unreachable "$(i3spec TEST_IPERF3_TCP 1)" "no route to 192.0.2.1 in the namespace" "$ns" 30 \
	iperf3 -c 192.0.2.1 -p $IP3 -J -i 0 -t 1 -P 1 --connect-timeout 3000
cap iperf3 host_unreachable "$(i3spec TEST_IPERF3_TCP 1)" "10.250.0.9 is on the link but absent: ARP fails" "$ns" 30 \
	iperf3 -c 10.250.0.9 -p $IP3 -J -i 0 -t 1 -P 1 --connect-timeout 5000
ip netns exec "$nsb" iptables -A INPUT -p tcp --dport $IP3 -j DROP
cap iperf3 timeout_drop "$(i3spec TEST_IPERF3_TCP 1)" "peer drops the port (iptables DROP); --connect-timeout 2000" "$ns" 30 \
	iperf3 -c 10.250.0.2 -p $IP3 -J -i 0 -t 1 -P 1 --connect-timeout 2000
ip netns exec "$nsb" iptables -F
cap iperf3 udp_block_too_large "$(i3spec TEST_IPERF3_UDP 1 ',"blockSizeBytes":"70000","udpTargetBps":"1000000000"')" "-l above iperf3's UDP limit: parameter error" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 1 -P 1 -l 70000 -u -b 1000000000 --connect-timeout 3000
timeout 20 iperf3 -s -p $IP3 -1 >/dev/null 2>&1 &
spid=$!
pids+=($spid)
waitport $IP3
(sleep 1.2 && kill -KILL "$(pgrep -P $spid -x iperf3)") &
cap iperf3 server_killed "$(i3spec TEST_IPERF3_TCP 1 '')" "server killed 1.2 s into a 3 s test" "" 30 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 3 -P 1 --connect-timeout 3000
bg $IP3 iperf3 -s -p $IP3 -1 --idle-timeout 60
cap iperf3 killed_deadline "$(i3spec TEST_IPERF3_TCP 1)" "client killed (SIGKILL) after 1 s of a 3 s test" "" 1 \
	iperf3 -c 127.0.0.1 -p $IP3 -J -i 0 -t 3 -P 1 --connect-timeout 3000
kill "${pids[-1]}" 2>/dev/null || true

########## curl
W='meshperf-curl 1\nhttp_code=%{http_code}\ntime_namelookup=%{time_namelookup}\ntime_connect=%{time_connect}\ntime_appconnect=%{time_appconnect}\ntime_starttransfer=%{time_starttransfer}\ntime_total=%{time_total}\nsize_download=%{size_download}\nexitcode=%{exitcode}\nerrormsg=%{errormsg}\n'
cspec='{"test":"TEST_HTTP","http":{"timeout":"2s"}}'
curlargs=(-q -g -v -sS -o /dev/null --noproxy '*' --max-time 2 --connect-timeout 2 -w "$W")
mkdir -p "$tmp/www"
echo "meshperf http target" >"$tmp/www/index.html"
(cd "$tmp/www" && exec timeout 120 python3 -m http.server $HP --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)
timeout 60 python3 -c "import socket,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $SILENT)); s.listen(8); time.sleep(50)" &
pids+=($!)
timeout 60 python3 -c "import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $EMPTY)); s.listen(8)
for _ in range(20):
    c,_=s.accept(); c.recv(4096); c.close()" &
pids+=($!)
waitport $HP
waitport $SILENT
waitport $EMPTY
cap curl ok_200 "$cspec" "python3 http.server on 127.0.0.1" "" 30 curl "${curlargs[@]}" http://127.0.0.1:$HP/
cap curl not_found_404 "$cspec" "python3 http.server on 127.0.0.1, missing path" "" 30 curl "${curlargs[@]}" http://127.0.0.1:$HP/missing
cap curl refused "$cspec" "nothing listens on 127.0.0.1:$FREE" "" 30 curl "${curlargs[@]}" http://127.0.0.1:$FREE/
cap curl no_response "$cspec" "a listener that never answers (--max-time 2)" "" 30 curl "${curlargs[@]}" http://127.0.0.1:$SILENT/
cap curl empty_reply "$cspec" "a listener that closes without answering" "" 30 curl "${curlargs[@]}" http://127.0.0.1:$EMPTY/
cap curl network_unreachable "$cspec" "no route to 192.0.2.1 in the namespace" "$ns" 30 curl "${curlargs[@]}" http://192.0.2.1:$HP/
# The name lookup fails inside the namespace: /etc/hosts has no such name
# and no resolver is reachable from there.
cap curl resolve_error "$cspec" "a host name that does not resolve (the runner only sends IPs)" "$ns" 30 curl "${curlargs[@]}" http://nohost.invalid:$HP/
ip netns exec "$ns" ping -c 1 -W 1 10.250.0.9 >/dev/null 2>&1 || true # leave a FAILED neighbour entry
cap curl host_unreachable "$cspec" "10.250.0.9 is on the link but absent: ARP fails" "$ns" 30 \
	curl -q -g -v -sS -o /dev/null --noproxy '*' --max-time 5 --connect-timeout 5 -w "$W" http://10.250.0.9:$HP/
ip netns exec "$nsb" iptables -A INPUT -p tcp --dport $HP -j DROP
cap curl connect_timeout "$cspec" "peer drops the port (iptables DROP)" "$ns" 30 curl "${curlargs[@]}" http://10.250.0.2:$HP/
ip netns exec "$nsb" iptables -F

echo "done"
