package report

import (
	"math"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// A figure that is not a finite number (a result stored as OK before the
// coordinator checked figures) is never printed as a number, is no
// sample of a cell, and leaves the other samples' median alone.
func TestNonFiniteFigures(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  string
	}{
		{"seconds NaN", FormatSeconds(math.NaN())},
		{"seconds +Inf", FormatSeconds(math.Inf(1))},
		{"bit/s -Inf", FormatBitsPerSecond(math.Inf(-1))},
		{"headline NaN", FormatHeadline(measurev1.Test_TEST_PING, math.NaN())},
	} {
		if tt.got != Invalid {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, Invalid)
		}
	}
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
	run := &measurev1.Run{Planned: []*measurev1.PlannedTest{{SrcNode: "a", DstNode: "b", Path: hh, Spec: &measurev1.TestSpec{Test: bw}}}}
	rows := Build(run, rogue[:1])
	if got := rows[0].Cell(bw); got != "invalid" || rows[0].OK() {
		t.Errorf("a NaN result's cell: %q, OK %t; want \"invalid\", not OK", got, rows[0].OK())
	}
	if p := rows[0].Problems(); len(p) != 1 || !strings.Contains(p[0], "without a finite") {
		t.Errorf("problems %q", p)
	}
}
