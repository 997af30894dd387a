#!/usr/bin/env python3
"""derive.py writes the testdata/<tool>/derived_*.txt cases: garbled or
truncated variants of real captures (see README.md). Run it from
agent/runner/testdata after capture.sh: `python3 derive.py`."""
import re


def derive(src, dst, note, fn):
    with open(src) as f:
        s = f.read()
    head, body = s.split('==> stdout <==\n', 1)
    head = re.sub(r'^# .*\n', '# Derived by derive.py from %s (not a real capture); format in README.md.\n' % src, head)
    head = re.sub(r'(?m)^note: .*$', 'note: DERIVED: ' + note, head)
    stdout, stderr = body.rsplit('==> stderr <==\n', 1)
    head, stdout, stderr = fn(head, stdout, stderr)
    with open(dst, 'w') as f:
        f.write(head + '==> stdout <==\n' + stdout + '==> stderr <==\n' + stderr)


def sub1(pattern, repl, s):
    out, n = re.subn(pattern, repl, s, count=1)
    assert n == 1, pattern
    return out


# ping
derive('ping/ok_loopback.txt', 'ping/derived_truncated_rtt.txt', 'output cut in the middle of the rtt line',
       lambda h, o, e: (h, o[:o.index('rtt min') + 30] + '\n', e))
derive('ping/ok_loopback.txt', 'ping/derived_garbled_rtt.txt', 'an rtt figure replaced by 1.2.3',
       lambda h, o, e: (h, sub1(r'= [0-9.]+/', '= 1.2.3/', o), e))
derive('ping/partial_loss.txt', 'ping/derived_duplicates.txt', '+2 duplicates added to the summary, with no (DUP!) reply line',
       lambda h, o, e: (h, sub1(' received, ', ' received, +2 duplicates, ', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_garbled_reply_time.txt', 'a reply time replaced by 0.0x0',
       lambda h, o, e: (h, sub1('time=0.036 ms', 'time=0.0x0 ms', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_garbled_reply_line.txt', 'time= of a reply misspelt tme=',
       lambda h, o, e: (h, sub1('icmp_seq=2 ttl=64 time=', 'icmp_seq=2 ttl=64 tme=', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_reply_missing.txt', 'a reply line removed: 4 lines, 5 received',
       lambda h, o, e: (h, sub1(r'(?m)^64 bytes from 127\.0\.0\.1: icmp_seq=3 .*\n', '', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_reply_outside_summary.txt', 'a reply time 0.050 made 5.050, above the summary max',
       lambda h, o, e: (h, sub1('icmp_seq=2 ttl=64 time=0.050 ms', 'icmp_seq=2 ttl=64 time=5.050 ms', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_truncated_reply.txt', 'the last reply printed (truncated), without a time',
       lambda h, o, e: (h, sub1('icmp_seq=5 ttl=64 time=0.039 ms', 'icmp_seq=5 ttl=64 (truncated)', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_corrupted.txt', 'a reply with a bad checksum added, +1 corrupted in the summary',
       lambda h, o, e: (h, sub1(' received, ', ' received, +1 corrupted, ',
                                sub1(r'(?m)^(64 bytes from 127\.0\.0\.1: icmp_seq=3 .*\n)',
                                     r'\g<1>64 bytes from 127.0.0.1: icmp_seq=3 ttl=64 time=0.044 ms (BAD CHECKSUM!)\n', o)), e))
derive('ping/ok_loopback.txt', 'ping/derived_more_received.txt', 'more replies than requests in the summary',
       lambda h, o, e: (h, sub1('5 packets transmitted', '3 packets transmitted', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_empty.txt', 'no output at all, exit 1',
       lambda h, o, e: (sub1('exit: 0', 'exit: 1', h), '', ''))
derive('ping/ok_loopback.txt', 'ping/derived_huge_count.txt', 'a transmitted count that does not fit 32 bits',
       lambda h, o, e: (h, sub1('5 packets transmitted', '99999999999 packets transmitted', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_canceled.txt', 'as if the run was canceled (SIGKILL, no summary)',
       lambda h, o, e: (sub1('exit: 0', 'exit: -1', h) + 'error: canceled\n', o[:o.index('\n---')] + '\n', e))

# qperf
def drop_block(o, size_line):
    return ''.join(b for b in re.split(r'(?m)^(?=tcp_bw:)', o) if size_line not in b)


derive('qperf/tcp_bw_loop_sizes.txt', 'qperf/derived_loop_missing_size.txt', 'the 512-byte block removed',
       lambda h, o, e: (h, drop_block(o, '512 bytes'), e))
derive('qperf/tcp_bw_ok.txt', 'qperf/derived_unknown_unit.txt', 'bw unit replaced by XB/sec',
       lambda h, o, e: (h, sub1(r'(?m)^(    bw .*) [A-Za-z]+/sec$', r'\1 XB/sec', o), e))
derive('qperf/tcp_bw_ok.txt', 'qperf/derived_truncated_block.txt', 'block cut before its first value',
       lambda h, o, e: (h, o.split('\n')[0] + '\n', e))
derive('qperf/udp_bw_ok.txt', 'qperf/derived_udp_bw_nothing_received.txt', 'recv_bw set to 0 bytes/sec',
       lambda h, o, e: (h, sub1(r'(?m)^(    recv_bw\s+=\s+)\S+ \S+$', r'\g<1>0 bytes/sec', o), e))
derive('qperf/tcp_bw_ok.txt', 'qperf/derived_bits_per_sec.txt', 'bw printed in bits (as with -ub): 26.9 Gb/sec',
       lambda h, o, e: (h, sub1(r'(?m)^(    bw\s+=\s+)\S+ \S+$', r'\g<1>26.9 Gb/sec', o), e))
derive('qperf/tcp_lat_ok.txt', 'qperf/derived_wrong_size.txt', 'msg_size printed as 2 KiB (2,048), not the requested 1',
       lambda h, o, e: (h, sub1(r'(?m)^(    msg_size\s+=\s+).*$', r'\g<1>2 KiB (2,048)', o), e))

# iperf3
derive('iperf3/tcp_ok.txt', 'iperf3/derived_truncated_json.txt', 'JSON cut in the middle of end',
       lambda h, o, e: (h, o[:o.index('"sum_sent"') + 40] + '\n', e))
derive('iperf3/tcp_ok.txt', 'iperf3/derived_no_end_sums.txt', 'end emptied, no error field',
       lambda h, o, e: (h, o[:o.index('\n\t"end":')] + '\n\t"end": {}\n}\n', e))


def negative_figure(h, o, e):
    i = o.index('"sum_received"')
    return h, o[:i] + sub1(r'"bits_per_second":\s*', '"bits_per_second": -', o[i:]), e


derive('iperf3/tcp_ok.txt', 'iperf3/derived_negative_figure.txt', 'a negative bits_per_second in sum_received', negative_figure)


def udp_all_lost(h, o, e):
    i = o.index('"sum_received"')
    r = o[i:]
    r = sub1(r'"bytes":\s*\d+', '"bytes": 0', r)
    r = sub1(r'"bits_per_second":\s*[0-9.e+]+', '"bits_per_second": 0', r)
    packets = re.search(r'"packets":\s*(\d+)', r).group(1)
    r = sub1(r'"lost_packets":\s*\d+', '"lost_packets": ' + packets, r)
    r = sub1(r'"lost_percent":\s*[0-9.e+]+', '"lost_percent": 100', r)
    return h, o[:i] + r, e


derive('iperf3/udp_loss.txt', 'iperf3/derived_udp_all_lost.txt', 'receiver figures set to nothing received', udp_all_lost)
derive('iperf3/tcp_ok.txt', 'iperf3/derived_not_json.txt', 'stdout replaced by text, no stderr',
       lambda h, o, e: (h, 'Connecting to host 127.0.0.1, port 30801\n', e))

# curl
derive('curl/ok_200.txt', 'curl/derived_truncated_w.txt', 'the -w block cut after time_connect',
       lambda h, o, e: (h, o[:o.index('time_appconnect')], e))
derive('curl/ok_200.txt', 'curl/derived_no_marker.txt', 'stdout empty, exit 0',
       lambda h, o, e: (h, '', e))
derive('curl/ok_200.txt', 'curl/derived_garbled_time.txt', 'time_total replaced by -1',
       lambda h, o, e: (h, sub1(r'(?m)^time_total=.*$', 'time_total=-1', o), e))
derive('curl/ok_200.txt', 'curl/derived_http_500.txt', 'http_code replaced by 500',
       lambda h, o, e: (h, sub1(r'(?m)^http_code=.*$', 'http_code=500', o), e))
derive('curl/refused.txt', 'curl/derived_refused_quiet.txt', 'refused without the -v lines (curl 7.88 alone does not say why)',
       lambda h, o, e: (h, o, ''.join(l for l in e.splitlines(True) if not l.startswith('*'))))


# Sanity rules (see ParsePing, ParseQperf, ParseIperf3, ParseCurl) and
# output cut at proc.MaxOutputBytes (the "truncated: true" header).
def truncated(h):
    return h + 'truncated: true\n'


derive('ping/ok_loopback.txt', 'ping/derived_rtt_out_of_order.txt', 'rtt min and max swapped: min > avg',
       lambda h, o, e: (h, sub1(r'= 0\.036/0\.043/0\.050/', '= 0.050/0.043/0.036/', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_rtt_absurd.txt', 'rtt max replaced by a 300-digit number',
       lambda h, o, e: (h, sub1(r'/0\.050/', '/' + '9' * 300 + '/', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_negative_mdev.txt', 'rtt mdev made negative',
       lambda h, o, e: (h, sub1(r'/0\.005 ms', '/-0.005 ms', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_more_transmitted.txt', '6 packets transmitted where -c 5 was asked',
       lambda h, o, e: (h, sub1('5 packets transmitted', '6 packets transmitted', o), e))
derive('ping/ok_loopback.txt', 'ping/derived_truncated_8mib.txt', 'stdout cut before the summary, as at proc\'s 8 MiB cap',
       lambda h, o, e: (truncated(h), o[:o.index('\n---')] + '\n', e))
derive('qperf/tcp_lat_ok.txt', 'qperf/derived_latency_wrong_unit.txt', 'latency printed as a bandwidth: 12.5 GB/sec',
       lambda h, o, e: (h, sub1(r'(?m)^(    latency\s+=\s+\S+) us$', r'\1 GB/sec', o), e))
derive('qperf/tcp_lat_ok.txt', 'qperf/derived_connect_failed_after_block.txt',
       'a good block and "failed to connect" (as for another size of a loop): the block stands',
       lambda h, o, e: (h, o, e + '127.0.0.1: failed to connect\n'))
derive('qperf/tcp_bw_ok.txt', 'qperf/derived_truncated_8mib.txt', 'stdout cut after the header, as at proc\'s 8 MiB cap',
       lambda h, o, e: (truncated(h), o.split('\n')[0] + '\n', e))


def udp_lost_above_packets(h, o, e):
    i = o.index('"sum_received"')
    return h, o[:i] + sub1(r'"lost_packets":\s*\d+', '"lost_packets": 9000', o[i:]), e


def rate_inconsistent(h, o, e):
    i = o.index('"sum_received"')
    return h, o[:i] + sub1(r'"bits_per_second":\s*[0-9.e+]+', '"bits_per_second": 62146703729.4', o[i:]), e


derive('iperf3/udp_loss.txt', 'iperf3/derived_udp_lost_above_packets.txt', 'sum_received lost_packets 9000 of 8627 packets',
       udp_lost_above_packets)
derive('iperf3/tcp_ok.txt', 'iperf3/derived_rate_inconsistent.txt', 'sum_received bits_per_second tripled: not bytes x 8 / seconds',
       rate_inconsistent)
derive('iperf3/tcp_ok.txt', 'iperf3/derived_negative_cpu.txt', 'cpu_utilization_percent host_total made negative',
       lambda h, o, e: (h, sub1(r'"host_total":\s*', '"host_total": -', o), e))
derive('iperf3/tcp_ok.txt', 'iperf3/derived_truncated_8mib.txt', 'JSON cut in the middle of end, as at proc\'s 8 MiB cap',
       lambda h, o, e: (truncated(h), o[:o.index('"sum_sent"') + 40] + '\n', e))
derive('curl/ok_200.txt', 'curl/derived_hex_time.txt', 'time_total written as a hex float, 0x1p-2',
       lambda h, o, e: (h, sub1(r'(?m)^time_total=.*$', 'time_total=0x1p-2', o), e))
derive('curl/ok_200.txt', 'curl/derived_total_before_connect.txt', 'time_total set before time_connect',
       lambda h, o, e: (h, sub1(r'(?m)^time_total=.*$', 'time_total=0.000400', o), e))

# issue 11: honest parsers (hand-written from real captures; the real
# cases are in capture_sources.sh)
derive('ping/foreign_some.txt', 'ping/derived_foreign_then_target_dup.txt',
       'seq 2 answered first by 127.0.0.9, then by the target (flagged DUP!), as iputils prints it when another host answers first; +1 duplicates',
       lambda h, o, e: (h, sub1(' received, ', ' received, +1 duplicates, ',
                                sub1(r'(?m)^64 bytes from 127\.0\.0\.1: icmp_seq=2 ttl=64 time=0\.071 ms\n',
                                     '64 bytes from 127.0.0.9: icmp_seq=2 ttl=64 time=0.069 ms (DIFFERENT ADDRESS!)\n'
                                     '64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.071 ms (DUP!)\n', o)), e))
derive('ping/ok_loopback.txt', 'ping/derived_complete_then_error.txt',
       'a complete summary, then an error on stderr and exit 2 (a hand-written case: not produced here)',
       lambda h, o, e: (sub1('exit: 0', 'exit: 2', h), o, 'ping: recvmsg: Invalid argument\n'))
derive('ping/send_failed_some.txt', 'ping/derived_send_errors_above_sent.txt',
       'a fourth sendmsg error on stderr with 3 of 6 replies: more local failures than unanswered probes',
       lambda h, o, e: (h, o, e + 'ping: sendmsg: Operation not permitted\n'))
derive('ping/route_gone_some.txt', 'ping/derived_route_gone_printed.txt',
       'the 2 sends that found no route named on stderr, as older iputils releases print them (20221126, which captured this, is silent)',
       lambda h, o, e: (h, o, e + 'ping: sendmsg: Network is unreachable\n' * 2))
derive('iperf3/udp_loss.txt', 'iperf3/derived_udp_receiver_bytes_zero.txt',
       'end.sum_received bytes and bits_per_second set to 0, its packets, lost_packets and jitter kept: most datagrams arrived',
       lambda h, o, e: (h, o[:o.index('"sum_received"')] + sub1(r'"bits_per_second":\s*[0-9.e+]+', '"bits_per_second": 0',
                        sub1(r'"bytes":\s*\d+', '"bytes": 0', o[o.index('"sum_received"'):])), e))
derive('iperf3/tcp_ok.txt', 'iperf3/derived_complete_then_error.txt',
       'a complete JSON result, then an error on stderr and exit 1 (a hand-written case: not produced here)',
       lambda h, o, e: (sub1('exit: 0', 'exit: 1', h), o, 'iperf3: error - control socket has closed unexpectedly\n'))
derive('qperf/tcp_lat_ok.txt', 'qperf/derived_complete_then_error.txt',
       'a complete block, then an error on stderr and exit 1 (a hand-written case: not produced here)',
       lambda h, o, e: (sub1('exit: 0', 'exit: 1', h), o, 'qperf: failed to receive results: Connection reset by peer\n'))
derive('curl/ok_200.txt', 'curl/derived_connect_beyond_max_time.txt',
       'time_connect, time_starttransfer and time_total set past 2 x --max-time 2 + 1 s, in order (a counter wrap)',
       lambda h, o, e: (h, sub1(r'(?m)^time_total=.*$', 'time_total=4294.967400',
                                sub1(r'(?m)^time_starttransfer=.*$', 'time_starttransfer=4294.967300',
                                     sub1(r'(?m)^time_connect=.*$', 'time_connect=4294.967296', o))), e))
derive('curl/ok_200.txt', 'curl/derived_connect_before_namelookup.txt', 'time_connect set below time_namelookup',
       lambda h, o, e: (h, sub1(r'(?m)^time_connect=.*$', 'time_connect=0.000010', o), e))
derive('curl/ok_200.txt', 'curl/derived_total_before_starttransfer.txt', 'time_total set below time_starttransfer',
       lambda h, o, e: (h, sub1(r'(?m)^time_total=.*$', 'time_total=0.010000', o), e))
