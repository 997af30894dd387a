// Package testresult makes the measurement results the tests of several
// packages feed to what reads results (metrics, remote write, cells):
// an OK result whose headline figure is a given value. Only _test.go
// files import it.
package testresult

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// OK is an OK result of test from src to dst over path, of run "run" and
// test "t1", started now, whose headline figure (internal/testcell's
// Headline) is v in the test's base unit: ping's median RTT in seconds
// (its average set to 10 v, so that reading the average instead shows),
// qperf tcp_lat's latency in seconds or tcp_bw's throughput in bit/s,
// iperf3 TCP's throughput in bit/s, HTTP's total time in seconds. Another
// test gets no metrics.
func OK(src, dst string, path measurev1.Path, test measurev1.Test, v float64) *measurev1.Result {
	r := &measurev1.Result{
		TestId: "t1", RunId: "run", SrcNode: src, DstNode: dst, Path: path,
		Spec: &measurev1.TestSpec{Test: test}, Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.Now(),
	}
	switch test {
	case measurev1.Test_TEST_PING:
		r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 10 * v, RttMedianSeconds: proto.Float64(v)}}
	case measurev1.Test_TEST_QPERF_TCP_LAT:
		r.Metrics = &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{LatencySeconds: v}}
	case measurev1.Test_TEST_QPERF_TCP_BW:
		r.Metrics = &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{ThroughputBps: v}}
	case measurev1.Test_TEST_IPERF3_TCP:
		r.Metrics = &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: v}}
	case measurev1.Test_TEST_HTTP:
		r.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{TotalSeconds: v}}
	}
	return r
}
