package diagnose

import (
	"fmt"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// externalResults are every node's ping results to target on both
// external paths, all with status st.
func externalResults(n int, target string, st func(src string) measurev1.Status) []*measurev1.Result {
	var rs []*measurev1.Result
	for i := 1; i <= n; i++ {
		src := fmt.Sprintf("node-%d", i)
		for _, p := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL} {
			for k := 0; k < 2; k++ {
				r := &measurev1.Result{SrcNode: src, DstNode: target, Path: p, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Status: st(src)}
				if r.Status == measurev1.Status_STATUS_OK {
					r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 1e-3}}
				}
				rs = append(rs, r)
			}
		}
	}
	return rs
}

// External targets are no nodes: a target that is down names no suspect,
// and results to targets neither hide nor make a node's fault.
func TestDiagnoseLeavesExternalOut(t *testing.T) {
	down := func(string) measurev1.Status { return measurev1.Status_STATUS_UNREACHABLE }
	up := func(string) measurev1.Status { return measurev1.Status_STATUS_OK }
	podsOf2 := func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
		if on("node-2")(s, d) && p == measurev1.Path_PATH_POD_TO_POD {
			return measurev1.Status_STATUS_TIMEOUT, 0
		}
		return measurev1.Status_STATUS_OK, 1
	}
	cases := []struct {
		name     string
		results  []*measurev1.Result
		want     string
		notInAny string // no finding may name this
	}{
		{"target down, mesh clean", append(mesh(4, nil), externalResults(4, "ingress", down)...), "", "ingress"},
		{"only a node's egress fails", append(mesh(4, nil), externalResults(4, "ingress", func(src string) measurev1.Status {
			if src == "node-3" {
				return measurev1.Status_STATUS_TIMEOUT
			}
			return measurev1.Status_STATUS_OK
		})...), "", "node-3"},
		{"node fault with a target down", append(mesh(4, podsOf2), externalResults(4, "ingress", down)...), "node-2 pod-network", "ingress"},
		{"node fault with targets up", append(mesh(3, podsOf2), externalResults(3, "ingress", up)...), "node-2 pod-network", "ingress"},
		{"externals only", externalResults(5, "ingress", down), "", "ingress"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			fs := Diagnose(tt.results)
			var got []string
			for _, f := range fs {
				got = append(got, fmt.Sprintf("%s %s", f.Node, f.Kind))
				for _, e := range f.Bad {
					if strings.Contains(e, "external") {
						t.Errorf("finding %s cites an external result: %s", f.Node, e)
					}
				}
			}
			if strings.Join(got, "; ") != tt.want {
				t.Errorf("findings %q, want %q\n%s", got, tt.want, Summary(fs))
			}
			for _, g := range got {
				if strings.HasPrefix(g, tt.notInAny+" ") {
					t.Errorf("finding names %s", tt.notInAny)
				}
			}
		})
	}
}
