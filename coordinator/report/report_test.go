package report

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func planned(id, src, dst string, path measurev1.Path, test measurev1.Test) *measurev1.PlannedTest {
	return &measurev1.PlannedTest{TestId: id, SrcNode: src, DstNode: dst, Path: path, Spec: &measurev1.TestSpec{Test: test}}
}

func ok(id, src, dst string, path measurev1.Path, r *measurev1.Result) *measurev1.Result {
	r.TestId, r.SrcNode, r.DstNode, r.Path, r.Status = id, src, dst, path, measurev1.Status_STATUS_OK
	return r
}

func TestBuildVerdicts(t *testing.T) {
	hh, pp := measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD
	ping, bw := measurev1.Test_TEST_PING, measurev1.Test_TEST_IPERF3_TCP
	run := &measurev1.Run{Planned: []*measurev1.PlannedTest{
		planned("t1", "a", "b", hh, ping), planned("t2", "a", "b", hh, bw),
		planned("t3", "a", "b", pp, ping), planned("t4", "a", "b", pp, bw),
		planned("t5", "b", "a", hh, ping),
	}}
	results := []*measurev1.Result{
		ok("t1", "a", "b", hh, &measurev1.Result{Spec: &measurev1.TestSpec{Test: ping}, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 62e-6}}}),
		ok("t2", "a", "b", hh, &measurev1.Result{Spec: &measurev1.TestSpec{Test: bw}, Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 9.41e9}}}),
		{TestId: "t3", SrcNode: "a", DstNode: "b", Path: pp, Spec: &measurev1.TestSpec{Test: ping}, Status: measurev1.Status_STATUS_UNREACHABLE, Message: "0/3 echo replies"},
		ok("t4", "a", "b", pp, &measurev1.Result{Spec: &measurev1.TestSpec{Test: bw}, Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 8.5e9}}}),
		// t5 has no result: missing.
	}
	rows := Build(run, results)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	tests := []struct {
		row          int
		wantOK       bool
		wantPing     string
		wantBW       string
		wantProblems string
	}{
		{0, true, "62µs", "9.41 Gbit/s", ""},
		{1, false, "unreachable", "8.5 Gbit/s", "ping: unreachable: 0/3 echo replies"},
		{2, false, "missing", "-", "ping: missing: 1 of 1 planned tests have no result"},
	}
	for _, tt := range tests {
		p := rows[tt.row]
		if p.OK() != tt.wantOK {
			t.Errorf("row %d (%s->%s %v): OK = %t, want %t", tt.row, p.Src, p.Dst, p.Path, p.OK(), tt.wantOK)
		}
		if got := p.Cell(ping); got != tt.wantPing {
			t.Errorf("row %d ping cell %q, want %q", tt.row, got, tt.wantPing)
		}
		if got := p.Cell(bw); got != tt.wantBW {
			t.Errorf("row %d iperf3 cell %q, want %q", tt.row, got, tt.wantBW)
		}
		if got := strings.Join(p.Problems(), "; "); got != tt.wantProblems {
			t.Errorf("row %d problems %q, want %q", tt.row, got, tt.wantProblems)
		}
	}
	if got, want := SummaryLine(rows), "1/3 pair-paths OK, 2 failed"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got, want := SummaryLine(rows[:1]), "1/1 pair-paths OK"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestCellMedianPerMessageSize(t *testing.T) {
	lat := measurev1.Test_TEST_QPERF_TCP_LAT
	q := func(size uint64, s float64) *measurev1.Result {
		return ok("t", "a", "b", 1, &measurev1.Result{Spec: &measurev1.TestSpec{Test: lat},
			Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{MsgSizeBytes: size, LatencySeconds: s}}})
	}
	p := &PairPath{Results: map[measurev1.Test][]*measurev1.Result{lat: {
		q(64, 20e-6), q(1024, 30e-6), q(64, 10e-6), q(64, 40e-6), q(1024, 50e-6),
	}}}
	if got, want := p.Cell(lat), "64B:20µs 1KiB:40µs"; got != want {
		t.Errorf("cell %q, want %q", got, want)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{FormatSeconds(17.9e-6), "17.9µs"},
		{FormatSeconds(0.00123), "1.23ms"},
		{FormatSeconds(2.5), "2.5s"},
		{FormatSeconds(5e-9), "5ns"},
		{FormatBitsPerSecond(11.28e9), "11.3 Gbit/s"},
		{FormatBitsPerSecond(771e6), "771 Mbit/s"},
		{FormatBitsPerSecond(12e3), "12 kbit/s"},
		{FormatBitsPerSecond(5), "5 bit/s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestPingCellIsTheMedianOfRepeats: a row's cell is the median over
// repeats of each result's median RTT (testcell.Headline), not of their
// averages.
func TestPingCellIsTheMedianOfRepeats(t *testing.T) {
	run := &measurev1.Run{Planned: []*measurev1.PlannedTest{planned("t1", "a", "b", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING)}}
	var results []*measurev1.Result
	for i, med := range []float64{40e-6, 50e-6, 1e-3} {
		r := &measurev1.Result{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 5e-3, RttMedianSeconds: proto.Float64(med)}}}
		r.TestId, r.SrcNode, r.DstNode, r.Path, r.Index = "t1", "a", "b", measurev1.Path_PATH_HOST_TO_HOST, uint32(i)
		results = append(results, r)
	}
	if got := Build(run, results)[0].Cell(measurev1.Test_TEST_PING); got != "50µs" {
		t.Errorf("ping cell %q, want 50µs", got)
	}
}

func TestLoadSummary(t *testing.T) {
	r := &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD},
		Metrics: &measurev1.Result_HttpLoad{HttpLoad: &measurev1.HttpLoadMetrics{Requests: 2000, FailedRequests: 10,
			RequestsPerSecond: 1427.57, LatencyP50Seconds: 0.007, LatencyP99Seconds: 0.017}}}
	if got, want := LoadSummary(r), "1.43k req/s, p50 7ms, p99 17ms, 10/2000 failed"; got != want {
		t.Errorf("LoadSummary = %q, want %q", got, want)
	}
	if v, ok := testcell.Measured(r); !ok || v != 0.007 {
		t.Errorf("Measured = %v, %v; want the p50 0.007", v, ok)
	}
	if got := FormatHeadline(measurev1.Test_TEST_HTTP_LOAD, 0.007); got != "7ms" {
		t.Errorf("FormatHeadline = %q", got)
	}
	if got := LoadSummary(&measurev1.Result{}); got != "" {
		t.Errorf("LoadSummary of no load = %q", got)
	}
	for v, want := range map[float64]string{950: "950", 2.5e6: "2.5M", math.Inf(1): Invalid} {
		if got := FormatCount(v); got != want {
			t.Errorf("FormatCount(%v) = %q, want %q", v, got, want)
		}
	}
}
