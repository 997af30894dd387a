package chart

import (
	"fmt"
	"math"
	"testing"

	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// qperfResult is one OK qperf result of test at size bytes from src to
// dst on path: v is the latency (s) or the throughput (bit/s).
func qperfResult(test measurev1.Test, path measurev1.Path, src, dst string, size uint64, v float64) *measurev1.Result {
	m := &measurev1.QperfMetrics{MsgSizeBytes: size}
	if test == measurev1.Test_TEST_QPERF_TCP_LAT {
		m.LatencySeconds = v
	} else {
		m.ThroughputBps = v
	}
	return &measurev1.Result{SrcNode: src, DstNode: dst, Path: path, Status: measurev1.Status_STATUS_OK,
		Spec:    &measurev1.TestSpec{Test: test, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{size}}}},
		Metrics: &measurev1.Result_Qperf{Qperf: m}}
}

// TestSizeSeriesValues pins the value of each point: the median over node
// pairs of each pair's median, in base units; a mean, a pooled median or
// a scaled unit gives other figures.
func TestSizeSeriesValues(t *testing.T) {
	const (
		lat  = measurev1.Test_TEST_QPERF_TCP_LAT
		bw   = measurev1.Test_TEST_QPERF_TCP_BW
		host = measurev1.Path_PATH_HOST_TO_HOST
		pod  = measurev1.Path_PATH_POD_TO_POD
	)
	var rs []*measurev1.Result
	add := func(test measurev1.Test, path measurev1.Path, src, dst string, size uint64, vs ...float64) {
		for _, v := range vs {
			rs = append(rs, qperfResult(test, path, src, dst, size, v))
		}
	}
	// host-host at 64 B: pair medians 20 us (of 10, 20, 30), 40 us and
	// 90 us: the point is 40 us (their mean is 50 us, the median of all
	// five samples 30 us). At 128 B, two pairs: (10 + 50) / 2 = 30 us
	// (the median of all four samples is 10 us).
	add(lat, host, "node-1", "node-2", 64, 10e-6, 20e-6, 30e-6)
	add(lat, host, "node-2", "node-1", 64, 40e-6)
	add(lat, host, "node-1", "node-3", 64, 90e-6)
	add(lat, host, "node-1", "node-2", 128, 10e-6, 10e-6, 10e-6)
	add(lat, host, "node-2", "node-1", 128, 50e-6)
	add(lat, pod, "node-1", "node-2", 64, 70e-6)
	add(bw, host, "node-1", "node-2", 65536, 1e9, 3e9)      // pair median 2 Gbit/s
	add(bw, host, "node-2", "node-1", 65536, 5e9, 6e9, 7e9) // 6 Gbit/s; the point: (2 + 6) / 2 = 4 Gbit/s
	rs = append(rs, &measurev1.Result{SrcNode: "node-1", DstNode: "node-2", Path: host, Status: measurev1.Status_STATUS_OK,
		Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP},
		Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 9e9}}}) // not qperf: no size, no point

	tests := []struct {
		latency bool
		want    map[measurev1.Path][]Point
	}{
		{true, map[measurev1.Path][]Point{
			host: {{SizeBytes: 64, Value: 40e-6}, {SizeBytes: 128, Value: 30e-6}},
			pod:  {{SizeBytes: 64, Value: 70e-6}},
		}},
		{false, map[measurev1.Path][]Point{
			host: {{SizeBytes: 65536, Value: 4e9}},
		}},
	}
	cells := testcell.Cells(rs)
	for _, tt := range tests {
		t.Run(fmt.Sprintf("latency=%t", tt.latency), func(t *testing.T) {
			series := SizeSeries(cells, tt.latency)
			if len(series) != len(tt.want) {
				t.Fatalf("%d series %v, want %d", len(series), series, len(tt.want))
			}
			for _, s := range series {
				want := tt.want[s.Path]
				if len(s.Points) != len(want) {
					t.Errorf("%v: points %v, want %v", s.Path, s.Points, want)
					continue
				}
				for i, p := range s.Points {
					if p.SizeBytes != want[i].SizeBytes || math.Abs(p.Value-want[i].Value) > 1e-12*want[i].Value {
						t.Errorf("%v point %d = %+v, want %+v", s.Path, i, p, want[i])
					}
				}
			}
		})
	}
}

// TestHeatmapValues pins the heatmap's scale: each square is its pair's
// median in the display unit (Gbit/s for a bandwidth, us for a latency),
// which the title's blue .. red range gives.
func TestHeatmapValues(t *testing.T) {
	iperf := func(src, dst string, bps float64) *measurev1.Result {
		return &measurev1.Result{SrcNode: src, DstNode: dst, Path: measurev1.Path_PATH_POD_TO_POD, Status: measurev1.Status_STATUS_OK,
			Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP},
			Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: bps}}}
	}
	lat := func(src, dst string, s float64) *measurev1.Result {
		return qperfResult(measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Path_PATH_HOST_TO_HOST, src, dst, 64, s)
	}
	tests := []struct {
		name      string
		results   []*measurev1.Result
		opt       Options
		wantTitle string
	}{
		// node-1 -> node-2: median of 1, 2, 9 Gbit/s is 2 (the mean, 4,
		// would make the range 3 .. 4); node-2 -> node-1: 3 Gbit/s.
		{"bandwidth in Gbit/s", []*measurev1.Result{iperf("node-1", "node-2", 1e9), iperf("node-1", "node-2", 2e9),
			iperf("node-1", "node-2", 9e9), iperf("node-2", "node-1", 3e9)}, Options{},
			"iperf3_tcp, pod-pod (median, Gbit/s; blue 2 .. red 3)"},
		// 15 us and 25 us.
		{"latency in us", []*measurev1.Result{lat("node-1", "node-2", 15e-6), lat("node-2", "node-1", 25e-6)},
			Options{HeatmapTest: measurev1.Test_TEST_QPERF_TCP_LAT},
			"qperf_tcp_lat 64B, host-host (median, µs; blue 15 .. red 25)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := heatmap(testcell.Cells(tt.results), tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if p.Title.Text != tt.wantTitle {
				t.Errorf("title %q, want %q", p.Title.Text, tt.wantTitle)
			}
		})
	}
}
