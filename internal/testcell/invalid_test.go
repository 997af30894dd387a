package testcell

import (
	"math"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestNonFiniteSamples: a figure that is not a finite number (a result
// stored as OK before the coordinator checked figures) is no sample of a
// cell, counts as STATUS_INVALID, and leaves the other samples' median
// alone. report's TestNonFiniteFigures checks how such a figure prints.
func TestNonFiniteSamples(t *testing.T) {
	honest := []*measurev1.Result{sample("a", "b", hh, bw, 9e9), sample("a", "b", hh, bw, 10e9), sample("a", "b", hh, bw, 11e9)}
	rogue := []*measurev1.Result{sample("a", "b", hh, bw, math.NaN()), sample("a", "b", hh, bw, math.Inf(1)), sample("a", "b", hh, bw, -5)}
	cells := Cells(append(append([]*measurev1.Result{}, honest...), rogue...))
	if len(cells) != 1 {
		t.Fatalf("%d cells, want 1", len(cells))
	}
	c := cells[0]
	if c.Stats.N != 3 || c.Stats.Median != 10e9 || c.Failed[measurev1.Status_STATUS_INVALID] != 3 {
		t.Errorf("cell: n %d, median %v, failed %v; want the 3 honest samples, median 1e10, 3 invalid", c.Stats.N, c.Stats.Median, c.Failed)
	}
	for _, r := range rogue {
		if v, ok := Measured(r); ok || StatusOf(r) != measurev1.Status_STATUS_INVALID {
			t.Errorf("Measured(%v) = %v, %t, StatusOf %v; want no measurement, STATUS_INVALID", r.GetIperf3().GetThroughputBps(), v, ok, StatusOf(r))
		}
	}
}
