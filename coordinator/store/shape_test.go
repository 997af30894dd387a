package store

import (
	"fmt"
	"testing"
)

// TestFleetReports: the reports have the fleet's shape: the nodes report
// in turn, each report to every other node x paths x kinds, about a
// million summaries in at most 2,000 reports.
func TestFleetReports(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("n%d", i) }
	tests := []struct{ nodes, paths, kinds, wantReports int }{
		{10, 2, 2, 2000},  // 36 per report: capped at 2,000 reports
		{1000, 2, 2, 250}, // 3,996 per report: 10^6 / 3,996
		{5000, 5, 5, 8},   // 124,975 per report
	}
	for _, tt := range tests {
		r := FleetReports(tt.nodes, tt.paths, tt.kinds, name)
		if len(r) != tt.wantReports {
			t.Fatalf("%d nodes: %d reports, want %d", tt.nodes, len(r), tt.wantReports)
		}
		for i, rep := range r {
			if rep.Src != name(i%tt.nodes) || len(rep.Summaries) != (tt.nodes-1)*tt.paths*tt.kinds {
				t.Fatalf("%d nodes: report %d from %s with %d summaries, want %s with %d", tt.nodes, i, rep.Src, len(rep.Summaries), name(i%tt.nodes), (tt.nodes-1)*tt.paths*tt.kinds)
			}
			for _, s := range rep.Summaries {
				if s.Dst == rep.Src || s.RTTMin > s.RTTMedian || s.RTTMedian > s.RTTP90 || s.RTTP90 > s.RTTMax || s.Received != s.Sent {
					t.Fatalf("%d nodes: report %d: summary %+v out of shape", tt.nodes, i, s)
				}
			}
		}
	}
}
