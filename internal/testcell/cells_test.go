package testcell

import (
	"math"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil/testresult"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// sample is an OK result with headline v (testresult.OK); a qperf
// tcp_lat one is of 64-byte messages.
func sample(src, dst string, path measurev1.Path, test measurev1.Test, v float64) *measurev1.Result {
	r := testresult.OK(src, dst, path, test, v)
	if test == measurev1.Test_TEST_QPERF_TCP_LAT {
		r.Spec.Params = &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{64}}}
		r.GetQperf().MsgSizeBytes = 64
	}
	return r
}

const (
	hh = measurev1.Path_PATH_HOST_TO_HOST
	pp = measurev1.Path_PATH_POD_TO_POD
	bw = measurev1.Test_TEST_IPERF3_TCP
	lt = measurev1.Test_TEST_QPERF_TCP_LAT
)

// meshRun is a 2-node run: host-host and pod-pod, iperf3 and qperf
// tcp_lat, three samples each; pod-pod has 9% less bandwidth and 1.5x the
// latency of host-host on both pairs.
func meshRun(bwScale, latScale float64) []*measurev1.Result {
	var rs []*measurev1.Result
	for _, p := range [][2]string{{"a", "b"}, {"b", "a"}} {
		for _, v := range []float64{9.9e9, 10e9, 10.1e9} {
			rs = append(rs, sample(p[0], p[1], hh, bw, v), sample(p[0], p[1], pp, bw, v*0.91*bwScale))
		}
		for _, v := range []float64{19e-6, 20e-6, 21e-6} {
			rs = append(rs, sample(p[0], p[1], hh, lt, v), sample(p[0], p[1], pp, lt, v*1.5*latScale))
		}
	}
	return rs
}

func TestCellsAndOverheads(t *testing.T) {
	rs := meshRun(1, 1)
	busy := sample("a", "b", pp, bw, 0)
	busy.Status, busy.Metrics = measurev1.Status_STATUS_BUSY, nil
	rs = append(rs, busy)
	cells := Cells(rs)
	if len(cells) != 8 {
		t.Fatalf("%d cells, want 8", len(cells))
	}
	for _, c := range cells {
		if c.Stats.N != 3 {
			t.Errorf("%s %v %s->%s: %d samples, want 3", c.Title(), c.Path, c.Src, c.Dst, c.Stats.N)
		}
		if c.Test == bw && c.Path == pp && c.Src == "a" && c.FailedCount() != 1 {
			t.Errorf("busy result not counted apart: %v", c.Failed)
		}
	}
	ovs := Overheads(cells)
	if len(ovs) != 2 {
		t.Fatalf("%d overheads, want 2 (iperf3 and qperf on pod-pod)", len(ovs))
	}
	for _, o := range ovs {
		want := map[measurev1.Test]float64{bw: 0.91, lt: 1.5}[o.Test]
		if math.Abs(o.Ratio-want) > 1e-9 || o.Pairs != 2 {
			t.Errorf("%v: ratio %v over %d pairs, want %v over 2", o.Test, o.Ratio, o.Pairs, want)
		}
	}
	got := strings.Join(Sentences(ovs, "vxlan"), "\n")
	if want := "pod->pod over vxlan: bandwidth -9% against host, latency x1.5"; got != want {
		t.Errorf("sentences %q, want %q", got, want)
	}
	ms := Matrices(cells)
	if len(ms) != 4 || ms[0].Title() == "" || len(ms[0].Nodes) != 2 {
		t.Errorf("matrices %d, first %q with %d nodes", len(ms), ms[0].Title(), len(ms[0].Nodes))
	}
}

func TestCompare(t *testing.T) {
	before := Cells(meshRun(1, 1))
	tests := []struct {
		name      string
		after     []*Cell
		wantWorse int
		wantBeter int
		failAt    float64
		wantFail  bool
	}{
		{"same numbers", Cells(meshRun(1, 1)), 0, 0, 5, false},
		{"pod bandwidth down 20%", Cells(meshRun(0.8, 1)), 2, 0, 5, true},
		{"pod bandwidth down 20%, gate at 25%", Cells(meshRun(0.8, 1)), 2, 0, 25, false},
		{"pod latency halved", Cells(meshRun(1, 0.5)), 0, 2, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := Compare(before, tt.after)
			if len(ds) != 8 {
				t.Fatalf("%d deltas, want 8", len(ds))
			}
			worse, better, fail := 0, 0, false
			for _, d := range ds {
				if !d.Tested {
					t.Errorf("%v not tested", d.Key)
				}
				if d.Worse {
					worse++
				}
				if d.Better {
					better++
				}
				fail = fail || d.WorseBy(tt.failAt)
			}
			if worse != tt.wantWorse || better != tt.wantBeter || fail != tt.wantFail {
				t.Errorf("worse %d better %d fail %t; want %d %d %t", worse, better, fail, tt.wantWorse, tt.wantBeter, tt.wantFail)
			}
		})
	}
	// A cell in one run only.
	only := Compare(before, nil)
	if len(only) != 8 || only[0].B != nil || only[0].Tested {
		t.Errorf("one-sided compare: %d deltas, first %+v", len(only), only[0])
	}
}

func TestByPath(t *testing.T) {
	merged := ByPath(Cells(meshRun(1, 1)))
	if len(merged) != 4 {
		t.Fatalf("%d merged cells, want 4 (2 tests x 2 paths)", len(merged))
	}
	for _, c := range merged {
		if c.Src != AllPairs || c.Dst != AllPairs || c.Stats.N != 2 {
			t.Errorf("%s %v: %s->%s n=%d, want */* over 2 pairs", c.Title(), c.Path, c.Src, c.Dst, c.Stats.N)
		}
	}
	// Without repeats, node pairs make the samples: 20% less pod bandwidth
	// over 2 pairs whose medians are equal within a run is significant.
	deltas := Compare(ByPath(Cells(meshRun(1, 1))), ByPath(Cells(meshRun(0.8, 1))))
	worse := 0
	for _, d := range deltas {
		if d.Worse {
			worse++
		}
	}
	if worse != 1 {
		t.Errorf("%d worse cells, want 1 (iperf3 pod-pod)", worse)
	}
}

// TestDeltaVerdict: too few samples is "not tested" whatever else is
// set; otherwise worse, better or same.
func TestDeltaVerdict(t *testing.T) {
	for _, tt := range []struct {
		d    Delta
		want string
	}{
		{Delta{}, "not tested"},
		{Delta{Worse: true}, "not tested"},
		{Delta{Tested: true}, "same"},
		{Delta{Tested: true, Worse: true}, "worse"},
		{Delta{Tested: true, Better: true}, "better"},
	} {
		if got := tt.d.Verdict(); got != tt.want {
			t.Errorf("Verdict of tested=%v worse=%v better=%v = %q, want %q", tt.d.Tested, tt.d.Worse, tt.d.Better, got, tt.want)
		}
	}
	ds := []Delta{{Worse: true}, {Tested: true, Worse: true}, {Tested: true, Worse: true}, {Tested: true, Better: true}, {Tested: true}}
	if worse, better := Tally(ds); worse != 2 || better != 1 {
		t.Errorf("Tally = %d worse, %d better; want 2, 1 (an untested cell counts in neither)", worse, better)
	}
}
