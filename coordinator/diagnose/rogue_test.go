package diagnose

import (
	"math"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// A rogue node that reports absurd figures for its pairs (RTT -5 s, NaN,
// +Inf, 1e300 bit/s), checked by the coordinator as it stores them
// (coordinator/sanity), leaves an honest node's medians as they were and
// makes diagnose blame no honest node.
func TestRogueFiguresDoNotSkewDiagnose(t *testing.T) {
	const rogue = "node-4"
	absurd := []func(r *measurev1.Result){
		func(r *measurev1.Result) { r.GetPing().RttAvgSeconds = -5 },
		func(r *measurev1.Result) { r.GetPing().RttAvgSeconds = math.NaN() },
		func(r *measurev1.Result) { r.GetQperf().LatencySeconds = math.Inf(1) },
		func(r *measurev1.Result) { r.GetIperf3().ThroughputBps = 1e300 },
	}
	tamper := func(rs []*measurev1.Result) []*measurev1.Result {
		for i, r := range rs {
			if r.GetSrcNode() != rogue {
				continue
			}
			for _, f := range absurd {
				func() {
					defer func() { _ = recover() }() // the metrics of another test
					f(r)
				}()
			}
			if r.GetIperf3() != nil && i%2 == 0 {
				r.GetIperf3().ThroughputBps = 1e300
			}
			// What the coordinator does before it stores a result.
			if err := sanity.CheckResult(r, sanity.Timeout(r.GetSpec())); err != nil {
				sanity.Invalidate(r, err)
			}
		}
		return rs
	}
	honest := mesh(4, nil)
	got := tamper(mesh(4, nil))
	for _, r := range got {
		if r.GetSrcNode() == rogue && r.GetStatus() != measurev1.Status_STATUS_INVALID {
			t.Fatalf("the rogue's result %v passed the checks", r)
		}
	}
	// The honest pairs' medians are what they were.
	want := map[testcell.CellKey]float64{}
	for _, c := range testcell.Cells(honest) {
		want[c.CellKey] = c.Stats.Median
	}
	for _, c := range testcell.Cells(got) {
		if c.Src == rogue {
			if len(c.Samples) != 0 {
				t.Errorf("cell %v of the rogue has samples %v", c.CellKey, c.Samples)
			}
			continue
		}
		if c.Stats.Median != want[c.CellKey] {
			t.Errorf("cell %v: median %v, want the honest %v", c.CellKey, c.Stats.Median, want[c.CellKey])
		}
	}
	for _, f := range Diagnose(got) {
		if f.Node != rogue {
			t.Errorf("diagnose blames honest node %s: %v", f.Node, f)
		}
		if strings.Contains(f.String(), "NaN") || strings.Contains(f.String(), "Inf") {
			t.Errorf("finding shows a non-finite figure: %v", f)
		}
	}
}
