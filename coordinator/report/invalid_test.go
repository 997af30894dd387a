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
	// The cells' side (a non-finite figure is no sample): testcell's
	// TestNonFiniteSamples.
	hh, bw := measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_IPERF3_TCP
	rogue := &measurev1.Result{SrcNode: "a", DstNode: "b", Path: hh, Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: bw},
		Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: math.NaN()}}}
	run := &measurev1.Run{Planned: []*measurev1.PlannedTest{{SrcNode: "a", DstNode: "b", Path: hh, Spec: &measurev1.TestSpec{Test: bw}}}}
	rows := Build(run, []*measurev1.Result{rogue})
	if got := rows[0].Cell(bw); got != "invalid" || rows[0].OK() {
		t.Errorf("a NaN result's cell: %q, OK %t; want \"invalid\", not OK", got, rows[0].OK())
	}
	if p := rows[0].Problems(); len(p) != 1 || !strings.Contains(p[0], "without a finite") {
		t.Errorf("problems %q", p)
	}
}
