// Package testspec owns what a valid test is: the defaults and limits of
// every tool's parameters (Normalize), which tool runs a test and whether it
// is heavy or needs a server, and the short names tests and paths have on
// the command line (Name/ParseTest, PathName/ParsePath).
//
// It holds the project's one table of each name operators read: tools
// (ToolProgram is the program, "curl"; ToolName what its tests reach on
// the destination, "HTTP"), result statuses (StatusName), run states
// (RunStateName), node states (NodeStateName) and gossip states
// (GossipStateName, GossipStateOrDash for table columns).
//
// Test names are the enum's words without the prefix, lower case: ping,
// qperf_tcp_lat, qperf_tcp_bw, qperf_udp_lat, qperf_udp_bw, iperf3_tcp,
// iperf3_udp, http, http_load. Path names are SOURCE-DESTINATION in the enum's words:
// host-host, host-pod, pod-pod, pod-service, host-service.
//
// A test's destination (dst_node on the wire) is a node or an external
// target, as its path says (KindOf): Destination holds which, read once
// (DestOf), and answers what callers ask of it (the nodes a test involves,
// whether node-pair statistics and localisation apply, whether a heavy
// test queues per target), so that no caller branches on the path.
//
// Two limits span several fields (Normalize has them all):
//   - iperf3 UDP: udp_target_bps is iperf3's -b, which applies PER STREAM,
//     so the load offered is udp_target_bps x parallel_streams; that
//     product must be at most 100 Gbit/s.
//   - Every test: ExpectedDuration must be at most MaxExpectedDuration (10
//     minutes, the longest a test server lives; the agent caps any work at
//     15 minutes). Only qperf can exceed it, with many sizes: 32 sizes x
//     (300s + 1s) is refused; sizes x (duration + 1s) <= 600s passes.
package testspec
