package cli

import (
	"fmt"
	"testing"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestNodesIn(t *testing.T) {
	r := func(src, dst string) *measurev1.Result { return &measurev1.Result{SrcNode: src, DstNode: dst} }
	tests := []struct {
		name    string
		results []*measurev1.Result
		want    int
	}{
		{"none", nil, 0},
		{"one pair both ways", []*measurev1.Result{r("a", "b"), r("b", "a")}, 2},
		{"three nodes", []*measurev1.Result{r("a", "b"), r("b", "c")}, 3},
		{"unnamed nodes do not count", []*measurev1.Result{r("a", ""), r("", "b")}, 2},
	}
	for _, tt := range tests {
		if got := nodesIn(tt.results); got != tt.want {
			t.Errorf("%s: nodesIn = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestDiagnoseSummary(t *testing.T) {
	ping := func(src, dst string, p measurev1.Path, st measurev1.Status) []*measurev1.Result {
		var rs []*measurev1.Result
		for range 2 {
			r := &measurev1.Result{SrcNode: src, DstNode: dst, Path: p, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Status: st}
			if st == measurev1.Status_STATUS_OK {
				r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 1e-3}}
			}
			rs = append(rs, r)
		}
		return rs
	}
	// run is a clean host-host ping mesh of n nodes, and ping from the
	// first ext of them to ingress on host-external with status st.
	run := func(n, ext int, st measurev1.Status) []*measurev1.Result {
		var rs []*measurev1.Result
		for i := 1; i <= n; i++ {
			for j := 1; j <= n; j++ {
				if i != j {
					rs = append(rs, ping(fmt.Sprintf("node-%d", i), fmt.Sprintf("node-%d", j), measurev1.Path_PATH_HOST_TO_HOST, measurev1.Status_STATUS_OK)...)
				}
			}
		}
		for i := 1; i <= ext; i++ {
			rs = append(rs, ping(fmt.Sprintf("node-%d", i), "ingress", measurev1.Path_PATH_HOST_TO_EXTERNAL, st)...)
		}
		return rs
	}
	const (
		ok   = measurev1.Status_STATUS_OK
		down = measurev1.Status_STATUS_TIMEOUT
	)
	tests := []struct {
		name    string
		results []*measurev1.Result
		want    string
	}{
		{"clean, 3 nodes", run(3, 0, ok), "no fault found"},
		{"2 nodes, no external", run(2, 0, ok), "cannot localise faults: the run has 2 node(s), localising needs 3 or more"},
		{"2 nodes, target down from both", run(2, 2, down),
			"target ingress: external-down (every test fails from all 2 nodes that measured it: 2 of 2 tests bad; e.g. node-1->ingress host-external ping: timeout)\n" +
				"cannot localise node faults: the run has 2 node(s), localising needs 3 or more"},
		{"2 nodes, target up", run(2, 2, ok),
			"cannot localise node faults: the run has 2 node(s), localising needs 3 or more\nno fault found towards the external targets"},
		{"external only, from 1 node", run(1, 1, down),
			"cannot localise node faults: the run has 1 node(s), localising needs 3 or more\nexternal targets not judged: measured from 1 node(s), judging them needs 2 or more"},
		{"3 nodes, external from 1", run(3, 1, down),
			"no fault found\nexternal targets not judged: measured from 1 node(s), judging them needs 2 or more"},
		{"3 nodes, target down from all", run(3, 3, down),
			"target ingress: external-down (every test fails from all 3 nodes that measured it: 3 of 3 tests bad; e.g. node-1->ingress host-external ping: timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diagnoseSummary(diagnose.Diagnose(tt.results), tt.results); got != tt.want {
				t.Errorf("summary\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
