package sanity

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestCheckResultForgottenFigures pins the figures the checks once let
// through: counts beyond the spec, zero round trips, a message size that
// is not the spec's, an MSS or counts beyond any link.
func TestCheckResultForgottenFigures(t *testing.T) {
	ping10 := func(f func(*measurev1.PingMetrics)) *measurev1.Result {
		r := okPing()
		r.Spec = &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: 10, Interval: durationpb.New(200e6)}}}
		f(r.GetPing())
		return r
	}
	qperf := func(test measurev1.Test, f func(*measurev1.QperfMetrics)) *measurev1.Result {
		r := okQperf()
		r.Spec = &measurev1.TestSpec{Test: test, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{65536}, Duration: durationpb.New(2e9)}}}
		m := r.GetQperf()
		if test == measurev1.Test_TEST_QPERF_TCP_LAT {
			m.ThroughputBps, m.LatencySeconds = 0, 2e-5
		}
		f(m)
		return r
	}
	iperf := func(f func(*measurev1.Iperf3Metrics)) *measurev1.Result { r := okIperf3(); f(r.GetIperf3()); return r }
	tcpIperf := func(f func(*measurev1.Iperf3Metrics)) *measurev1.Result {
		r := okIperf3()
		r.Spec.Test = measurev1.Test_TEST_IPERF3_TCP
		m := r.GetIperf3()
		m.Packets, m.LostPackets, m.LossRatio, m.BytesSent = 0, 0, 0, 0
		f(m)
		return r
	}
	tests := []struct {
		name       string
		r          *measurev1.Result
		wantReason Reason // "" when it passes
		wantIn     string
	}{
		{"10 of 10", ping10(func(m *measurev1.PingMetrics) { m.PacketsTransmitted, m.PacketsReceived, m.LossRatio = 10, 10, 0 }), "", ""},
		{"4e9 of a 10-packet test", ping10(func(m *measurev1.PingMetrics) { m.PacketsTransmitted, m.PacketsReceived, m.LossRatio = 4e9, 4e9, 0 }),
			OutOfBounds, "packets_transmitted 4000000000 is over the spec's count 10"},
		{"default count 5", func() *measurev1.Result {
			r := okPing()
			r.GetPing().PacketsTransmitted, r.GetPing().PacketsReceived, r.GetPing().LossRatio = 6, 6, 0
			return r
		}(), OutOfBounds, "packets_transmitted 6 is over the spec's count 5"},
		{"duplicates", ping10(func(m *measurev1.PingMetrics) { m.Duplicates = 1e9 }), Inconsistent, "duplicates 1000000000 is over packets_transmitted 5"},
		{"errors", ping10(func(m *measurev1.PingMetrics) { m.Errors = 6 }), Inconsistent, "errors 6 is over packets_transmitted 5"},
		{"all-zero RTTs with replies", ping10(func(m *measurev1.PingMetrics) {
			m.RttMinSeconds, m.RttAvgSeconds, m.RttMaxSeconds, m.RttMdevSeconds, m.RttMedianSeconds = 0, 0, 0, 0, nil
		}), Inconsistent, "rtt_min_seconds 0 is not positive with 4 replies"},
		{"qperf bw", qperf(measurev1.Test_TEST_QPERF_TCP_BW, func(*measurev1.QperfMetrics) {}), "", ""},
		{"qperf lat", qperf(measurev1.Test_TEST_QPERF_TCP_LAT, func(*measurev1.QperfMetrics) {}), "", ""},
		{"qperf latency 0", qperf(measurev1.Test_TEST_QPERF_TCP_LAT, func(m *measurev1.QperfMetrics) { m.LatencySeconds = 0 }),
			Inconsistent, "latency_seconds 0 is not positive"},
		{"qperf size not the spec's", qperf(measurev1.Test_TEST_QPERF_TCP_BW, func(m *measurev1.QperfMetrics) { m.MsgSizeBytes = 1 << 62 }),
			Inconsistent, "msg_size_bytes 4611686018427387904 is not the spec's"},
		{"iperf3 MSS", tcpIperf(func(m *measurev1.Iperf3Metrics) { m.TcpMssBytes = 1448 }), "", ""},
		{"iperf3 MSS over 65535", tcpIperf(func(m *measurev1.Iperf3Metrics) { m.TcpMssBytes = 1 << 31 }), OutOfBounds, "tcp_mss_bytes 2147483648"},
		{"iperf3 retransmits without bytes_sent", tcpIperf(func(m *measurev1.Iperf3Metrics) { m.Retransmits = 1 << 62 }), OutOfBounds, "retransmits"},
		{"iperf3 TCP received what was sent", tcpIperf(func(m *measurev1.Iperf3Metrics) { m.BytesSent, m.BytesReceived = 1_000_000, 1_000_000 }), "", ""},
		{"iperf3 TCP received more than sent", tcpIperf(func(m *measurev1.Iperf3Metrics) { m.BytesSent, m.BytesReceived = 1_000_000, 10_000_000_000 }),
			Inconsistent, "bytes_received 10000000000 is over bytes_sent 1000000 (TCP)"},
		{"iperf3 packets", iperf(func(m *measurev1.Iperf3Metrics) { m.Packets = 1 << 62 }), OutOfBounds, "packets 4611686018427387904"},
		{"http size", func() *measurev1.Result { r := okHTTP(); r.GetHttp().SizeDownloadBytes = 1 << 62; return r }(), OutOfBounds, "size_download_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckResult(tt.r, Timeout(tt.r.GetSpec()))
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("CheckResult: %v, want it to pass", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || ReasonOf(err) != tt.wantReason || !strings.Contains(err.Error(), tt.wantIn) {
				t.Fatalf("CheckResult: %v (reason %s), want reason %s and %q", err, ReasonOf(err), tt.wantReason, tt.wantIn)
			}
		})
	}
}
