// Package testspec owns what a valid test is: the defaults and limits of
// every tool's parameters (Normalize), which tool runs a test and whether it
// is heavy or needs a server, and the short names tests and paths have on
// the command line (Name/ParseTest, PathName/ParsePath).
//
// Test names are the enum's words without the prefix, lower case: ping,
// qperf_tcp_lat, qperf_tcp_bw, qperf_udp_lat, qperf_udp_bw, iperf3_tcp,
// iperf3_udp, http. Path names are SOURCE-DESTINATION in the enum's words:
// host-host, host-pod, pod-pod, pod-service, host-service.
package testspec
