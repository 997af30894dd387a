package runner

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestParsersHandComputed pins the OK results of each tool's parser to
// figures worked out by hand from the raw text of a capture (each
// expected value says how), not to a golden file the parser itself
// wrote: a unit slip (ms left as s, bytes as bits, a percentage as a
// ratio) or a field taken from the wrong line fails here even after a
// careless go test -update. Floats must agree within 1e-12 relative;
// every other field exactly, and no field may be set that is not listed.
func TestParsersHandComputed(t *testing.T) {
	const us, ms = 1e-6, 1e-3
	tests := []struct {
		capture string
		message string // the result's message ("" for none)
		want    []proto.Message
	}{
		// rtt min/avg/max/mdev = 0.036/0.043/0.050/0.005 ms; the median of
		// the replies 0.040 0.050 0.050 0.036 0.039 ms is 0.040 ms.
		{"ping/ok_loopback", "", []proto.Message{&measurev1.PingMetrics{
			PacketsTransmitted: 5, PacketsReceived: 5,
			RttMinSeconds: 0.036 * ms, RttAvgSeconds: 0.043 * ms, RttMaxSeconds: 0.050 * ms, RttMdevSeconds: 0.005 * ms,
			RttMedianSeconds: proto.Float64(0.040 * ms)}}},
		// Four replies 0.023 0.069 0.049 0.052 ms: the median is the mean
		// of the middle two, (0.049 + 0.052) / 2 = 0.0505 ms.
		{"ping/ok_loopback_even", "", []proto.Message{&measurev1.PingMetrics{
			PacketsTransmitted: 4, PacketsReceived: 4,
			RttMinSeconds: 0.023 * ms, RttAvgSeconds: 0.048 * ms, RttMaxSeconds: 0.069 * ms, RttMdevSeconds: 0.016 * ms,
			RttMedianSeconds: proto.Float64(0.0505 * ms)}}},
		// 10 transmitted, 5 received: loss 5/10; replies 0.063 0.051 0.052
		// 0.071 0.055 ms, median 0.055 ms.
		{"ping/partial_loss", "", []proto.Message{&measurev1.PingMetrics{
			PacketsTransmitted: 10, PacketsReceived: 5, LossRatio: 0.5,
			RttMinSeconds: 0.051 * ms, RttAvgSeconds: 0.058 * ms, RttMaxSeconds: 0.071 * ms, RttMdevSeconds: 0.007 * ms,
			RttMedianSeconds: proto.Float64(0.055 * ms)}}},
		// "+4 duplicates"; the median is of the first reply per sequence
		// (0.084 0.082 0.082 0.084 0.075: 0.082 ms), not of all nine lines
		// (which would give 0.083 ms).
		{"ping/duplicates", "", []proto.Message{&measurev1.PingMetrics{
			PacketsTransmitted: 5, PacketsReceived: 5, Duplicates: 4,
			RttMinSeconds: 0.075 * ms, RttAvgSeconds: 0.082 * ms, RttMaxSeconds: 0.085 * ms, RttMdevSeconds: 0.003 * ms,
			RttMedianSeconds: proto.Float64(0.082 * ms)}}},
		// Every second echo reply's source rewritten to 127.0.0.9: only
		// the target's three count (seq 2, 4, 6: 0.071 0.078 0.070 ms),
		// loss 3/6; the figures are recomputed from them, not ping's
		// summary of all six: min 0.070, max 0.078, avg 0.219 / 3 = 0.073,
		// median 0.071 ms, mdev ping's way sqrt(mean(x^2) - avg^2).
		{"ping/foreign_some", "3 echo replies came from other addresses than 127.0.0.1 and are not counted (127.0.0.9 x3); rtt figures are from the target's replies only",
			[]proto.Message{&measurev1.PingMetrics{
				PacketsTransmitted: 6, PacketsReceived: 3, LossRatio: 0.5,
				RttMinSeconds: 0.070 * ms, RttAvgSeconds: 0.073 * ms, RttMaxSeconds: 0.078 * ms,
				RttMdevSeconds:   math.Sqrt((0.071*0.071+0.078*0.078+0.070*0.070)/3-0.073*0.073) * ms,
				RttMedianSeconds: proto.Float64(0.071 * ms)}}},
		// latency = 12.5 us; msg_rate = 80 K/sec; msg_size = 1 bytes;
		// time = 1 sec.
		{"qperf/tcp_lat_ok", "", []proto.Message{&measurev1.QperfMetrics{
			MsgSizeBytes: 1, LatencySeconds: 12.5 * us, MsgRateHz: 80e3, DurationSeconds: 1}}},
		{"qperf/udp_lat_ok", "", []proto.Message{&measurev1.QperfMetrics{
			MsgSizeBytes: 1, LatencySeconds: 11.6 * us, MsgRateHz: 86.2e3, DurationSeconds: 1}}},
		// bw = 4.2 GB/sec: 4.2e9 bytes/s x 8 = 3.36e10 bit/s (decimal G);
		// msg_size = 64 KiB (65,536); msg_rate = 64.1 K/sec.
		{"qperf/tcp_bw_ok", "", []proto.Message{&measurev1.QperfMetrics{
			MsgSizeBytes: 65536, ThroughputBps: 4.2e9 * 8, MsgRateHz: 64.1e3, DurationSeconds: 1}}},
		// recv_bw = 5.49 GB/sec is the throughput (x 8: 4.392e10 bit/s),
		// send_bw = 5.88 GB/sec the sender's (4.704e10 bit/s).
		{"qperf/udp_bw_ok", "", []proto.Message{&measurev1.QperfMetrics{
			MsgSizeBytes: 32768, ThroughputBps: 5.49e9 * 8, SendThroughputBps: 5.88e9 * 8, MsgRateHz: 167e3, DurationSeconds: 1}}},
		// One block per size: 33.2 MB/sec at 64 bytes, 236 MB/sec at 512
		// bytes, 1.23 GB/sec at 4 KiB (4,096).
		{"qperf/tcp_bw_loop_sizes", "", []proto.Message{
			&measurev1.QperfMetrics{MsgSizeBytes: 64, ThroughputBps: 33.2e6 * 8, MsgRateHz: 519e3, DurationSeconds: 1},
			&measurev1.QperfMetrics{MsgSizeBytes: 512, ThroughputBps: 236e6 * 8, MsgRateHz: 461e3, DurationSeconds: 1},
			&measurev1.QperfMetrics{MsgSizeBytes: 4096, ThroughputBps: 1.23e9 * 8, MsgRateHz: 301e3, DurationSeconds: 1}}},
		// end.sum_received: bits_per_second 20715567909.801563, bytes
		// 2589720470, seconds 1.000106; end.sum_sent: bits_per_second
		// 20718390754.256451, bytes 2589982720, retransmits 18;
		// cpu_utilization_percent host_total 99.323505392189162 and
		// remote_total 42.556065603930712, as ratios (/ 100);
		// start.tcp_mss_default 32768.
		{"iperf3/tcp_ok", "", []proto.Message{&measurev1.Iperf3Metrics{
			ThroughputBps: 20715567909.801563, SenderThroughputBps: 20718390754.256451, Retransmits: 18,
			BytesSent: 2589982720, BytesReceived: 2589720470, DurationSeconds: 1.000106,
			SenderCpuRatio: 99.323505392189162 / 100, ReceiverCpuRatio: 42.556065603930712 / 100, TcpMssBytes: 32768}}},
		// UDP: end.sum_received bits_per_second 89919472.749668077, bytes
		// 11242272, seconds 1.000208, lost_packets 863 of packets 8627
		// (loss 863/8627), jitter_ms 0.00446905339815918 (in s: / 1000);
		// end.sum_sent bits_per_second 99921878.3901741, bytes 12491896;
		// cpu host_total 7.7655363142156837 %, remote_total
		// 5.3600725433875649 %.
		{"iperf3/udp_loss", "", []proto.Message{&measurev1.Iperf3Metrics{
			ThroughputBps: 89919472.749668077, SenderThroughputBps: 99921878.3901741,
			JitterSeconds: 0.00446905339815918 * ms, LostPackets: 863, Packets: 8627, LossRatio: 863.0 / 8627,
			BytesSent: 12491896, BytesReceived: 11242272, DurationSeconds: 1.000208,
			SenderCpuRatio: 7.7655363142156837 / 100, ReceiverCpuRatio: 5.3600725433875649 / 100}}},
		// curl's -w lines: http_code=200, time_namelookup=0.000065,
		// time_connect=0.000495, time_appconnect=0.000000 (no TLS),
		// time_starttransfer=0.010510, time_total=0.010837 (seconds),
		// size_download=21.
		{"curl/ok_200", "", []proto.Message{&measurev1.HttpMetrics{
			HttpCode: 200, NamelookupSeconds: 65 * us, ConnectSeconds: 495 * us,
			FirstByteSeconds: 10.510 * ms, TotalSeconds: 10.837 * ms, SizeDownloadBytes: 21}}},
		// ab -n 2000 -c 10: Complete 2000, Failed 0; 1427.57 [#/sec];
		// Transfer rate 200.75 [Kbytes/sec] = 200.75 x 1024 x 8 bit/s;
		// Time taken 1.401 s; Total transferred 288000 bytes; Time per
		// request 7.005 [ms] (mean); percentiles 50% 7, 90% 11, 95% 12,
		// 99% 17, 100% 26 ms.
		{"ab/ok", "", []proto.Message{&measurev1.HttpLoadMetrics{
			Requests: 2000, Concurrency: 10, CompletedRequests: 2000, SuccessfulRequests: 2000,
			RequestsPerSecond: 1427.57, TransferRateBps: 200.75 * 1024 * 8, DurationSeconds: 1.401, TransferredBytes: 288000,
			LatencyMeanSeconds: 7.005 * ms, LatencyP50Seconds: 7 * ms, LatencyP90Seconds: 11 * ms, LatencyP95Seconds: 12 * ms,
			LatencyP99Seconds: 17 * ms, LatencyMaxSeconds: 26 * ms}}},
		// -n 500: Complete 500, Failed 250 (Length 250), Non-2xx 250: at
		// least 500 - 250 - 250 = 0 successful, so 500 - 0 = 500 failed;
		// 209.95 [Kbytes/sec] x 8192; 6.745 ms mean; 50% 4, 90% 13, 95%
		// 16, 99% 38, 100% 39 ms.
		{"ab/non2xx_half", "successful_requests 0 is a lower bound: ab may count one request in several of Connect 0, Receive 0, Length 250, Exceptions 0 and Non-2xx 250",
			[]proto.Message{&measurev1.HttpLoadMetrics{
				Requests: 500, Concurrency: 10, CompletedRequests: 500, SuccessfulRequests: 0, FailedRequests: 500,
				LengthFailures: 250, Non_2XxResponses: 250,
				RequestsPerSecond: 1482.65, TransferRateBps: 209.95 * 1024 * 8, DurationSeconds: 0.337, TransferredBytes: 72500,
				LatencyMeanSeconds: 6.745 * ms, LatencyP50Seconds: 4 * ms, LatencyP90Seconds: 13 * ms, LatencyP95Seconds: 16 * ms,
				LatencyP99Seconds: 38 * ms, LatencyMaxSeconds: 39 * ms}}},
	}
	tools := map[string]bool{}
	for _, tt := range tests {
		tools[filepath.Dir(tt.capture)] = true
		t.Run(tt.capture, func(t *testing.T) {
			c := readCapture(t, filepath.Join("testdata", tt.capture+".txt"))
			got, _ := resultsOf(c.spec, c.out, c.runErr)
			if len(got) != len(tt.want) {
				t.Fatalf("%d results, want %d: %v", len(got), len(tt.want), got)
			}
			for i, r := range got {
				if r.GetStatus() != measurev1.Status_STATUS_OK || r.GetMessage() != tt.message {
					t.Errorf("result %d: %v %q, want OK %q", i, r.GetStatus(), r.GetMessage(), tt.message)
				}
				for _, d := range diffFigures(tt.want[i], metricsOf(r)) {
					t.Errorf("result %d: %s", i, d)
				}
			}
		})
	}
	for _, tool := range []string{"ping", "qperf", "iperf3", "curl", "ab"} {
		if !tools[tool] {
			t.Errorf("no hand-computed case for %s", tool)
		}
	}
}

// metricsOf returns the metrics message a result carries, or nil.
func metricsOf(r *measurev1.Result) proto.Message {
	switch m := r.GetMetrics().(type) {
	case *measurev1.Result_Ping:
		return m.Ping
	case *measurev1.Result_Qperf:
		return m.Qperf
	case *measurev1.Result_Iperf3:
		return m.Iperf3
	case *measurev1.Result_Http:
		return m.Http
	case *measurev1.Result_HttpLoad:
		return m.HttpLoad
	}
	return nil
}

// diffFigures compares two metrics messages field by field: doubles
// within 1e-12 relative, every other field exactly, presence included.
func diffFigures(want, got proto.Message) []string {
	if got == nil || want.ProtoReflect().Descriptor() != got.ProtoReflect().Descriptor() {
		return []string{fmt.Sprintf("metrics %T, want %T", got, want)}
	}
	w, g := want.ProtoReflect(), got.ProtoReflect()
	var diffs []string
	fields := w.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if w.Has(fd) != g.Has(fd) {
			diffs = append(diffs, fmt.Sprintf("%s: set=%t, want set=%t (%v)", fd.Name(), g.Has(fd), w.Has(fd), g.Get(fd)))
			continue
		}
		wv, gv := w.Get(fd), g.Get(fd)
		if fd.Kind() == protoreflect.DoubleKind {
			if x, y := wv.Float(), gv.Float(); math.Abs(x-y) > 1e-12*math.Abs(x) {
				diffs = append(diffs, fmt.Sprintf("%s = %.17g, want %.17g", fd.Name(), y, x))
			}
			continue
		}
		if !wv.Equal(gv) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", fd.Name(), gv, wv))
		}
	}
	return diffs
}
