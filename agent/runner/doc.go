// Package runner owns the agent's side of a measurement: which argv each
// tool runs with (ping, qperf, iperf3, curl, ab; never a shell string), in which
// network namespace, how its output is parsed into Results in base units
// (seconds, bits per second, bytes, ratios in 0..1), and how every failure
// maps to a Status with the tool's own words. It also builds the servers'
// argv (ServerCommand) and finds the installed tools' versions
// (DetectTools). Run serves node targets (an IP); RunExternal serves an
// external target the caller resolved (ping to its IP, curl to its URL
// pinned to that IP with --resolve, iperf3 and qperf to that IP on the
// server ports the allowlist names for the target, no other).
//
// Tool versions the parsers were written against, from captured outputs in
// testdata/: iputils ping 20221126, qperf 0.4.11, iperf 3.12, curl 7.88.1,
// ab 2.3 (ApacheBench, apache2-utils 2.4.71).
//
// Status mapping, by tool:
//   - ping: all probes lost, "Destination Host Unreachable", "connect:
//     Network is unreachable" -> UNREACHABLE; partial loss is OK with
//     loss_ratio. Only replies from the target count (one per icmp_seq,
//     DUP! copies once): replies from other addresses are named in the
//     message, and none from the target -> UNREACHABLE. ping's own send
//     errors on stderr ("ping: sendmsg: Operation not permitted", a local
//     firewall) -> TOOL_ERROR when every probe failed so, else they are
//     not counted as sent or lost and the message says how many
//     (ping_source.go).
//   - qperf: "failed to connect" (qperf tries for 5 s and does not say why)
//     -> a TCP probe of the listen port from the same namespace decides
//     REFUSED, UNREACHABLE or TIMEOUT; "timed out" -> TIMEOUT; a latency or
//     bandwidth of 0 -> TOOL_ERROR; udp_bw that received nothing ->
//     UNREACHABLE; a requested size missing from the output -> the tool's
//     words, or PARSE_ERROR.
//   - iperf3: the JSON "error" (3.12 exits 0 with it): busy -> BUSY,
//     "Connection refused" -> REFUSED, "No route to host"/"Network is
//     unreachable" -> UNREACHABLE, "Connection timed out" -> TIMEOUT, other
//     -> TOOL_ERROR. UDP is judged by the receiver's packet counts: all
//     lost -> UNREACHABLE; bytes 0 while packets arrived -> OK with an
//     estimated throughput and the contradiction in the message.
//   - curl: exit 7 -> REFUSED or UNREACHABLE per -v's reason, 28 -> TIMEOUT,
//     6 -> UNREACHABLE, other -> TOOL_ERROR; HTTP status not 2xx ->
//     TOOL_ERROR without metrics.
//   - ab (http_load, against the destination's HTTP target): a summary ->
//     OK, whatever failed: failed_requests = requests - successful, with
//     successful = completed - ab's "Failed requests" - "Non-2xx
//     responses" (at least 0), so 5xx answers, length mismatches, connect
//     and receive errors and requests not done by -t all count; a summary
//     whose answers carried no byte at all (every request refused, reset
//     or timed out; ab -r counts them and goes on) -> a TCP probe of the
//     port decides REFUSED, UNREACHABLE or TIMEOUT; no summary (ab aborted:
//     "apr_pollset_poll: The timeout specified has expired (70007)" when
//     no request in flight got a byte for -s, "Test aborted after 10
//     failures") -> TIMEOUT, REFUSED, UNREACHABLE or TOOL_ERROR by ab's
//     words, with "Total of N requests completed" in the message: an
//     aborted ab printed no figure of the requests it did, so there is no
//     measurement to keep. ParseAb has the details and the PARSE_ERROR
//     checks.
//   - ping, qperf, iperf3, ab: a complete, plausible result followed by an
//     error or a non-zero exit -> OK with the figures, the exit status and
//     the tool's words in the message (exitNote: why not TOOL_ERROR).
//   - all: the context's deadline -> TIMEOUT, its cancellation -> CANCELED,
//     tool not installed -> TOOL_MISSING, a refused spec or request ->
//     INVALID, unreadable output -> PARSE_ERROR; output cut at proc's 8 MiB
//     cap that does not parse -> a message starting "TOOL output truncated
//     at 8 MiB".
//
// Figures that cannot be a measurement are PARSE_ERROR, with a message
// naming the field and the value, not OK results:
//   - ping: rtt figures that are not plain decimals, above 1 hour, or out
//     of order (min <= avg <= max, mdev <= max; negative mdev); more
//     packets transmitted than -c asked for (fewer is OK: ping interrupted
//     by SIGINT prints what it sent).
//   - qperf: a unit of the wrong kind for its key (latency a time, bw a
//     bandwidth, msg_rate a message rate, ...: qperfKeyKind); a latency
//     above 1 hour.
//   - iperf3: negative, non-finite or fractional counts; bits_per_second
//     off bytes x 8 / seconds by more than 2x; bytes in under 1 ms; jitter
//     above 1 hour; lost_packets above packets; lost_percent above 100; a
//     negative cpu_utilization_percent.
//   - curl: time_* not plain decimals (no hex float, exponent, sign or
//     underscore), above 1 day or above twice --max-time plus 1 s (curl
//     stops at --max-time: a counter wrap); times out of order (namelookup
//     <= connect <= appconnect <= starttransfer <= total).
//
// Whatever the path, a result that is not OK carries no metrics and a
// message that is never empty and never starts with punctuation (finish);
// an OK result's message is empty unless the tool said more than its
// figures (see above), and is bounded like any message;
// the parsers' own failures follow the same message rule (parseFailure).
//
// qperf's latency is its ONE-WAY figure (half the round trip), stored as
// latency_seconds unchanged.
package runner
