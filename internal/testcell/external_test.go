package testcell

import (
	"math"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// pod->external is reported against host->external on the same node and
// target, never against host->host; its matrix has targets as
// destinations.
func TestExternalOverhead(t *testing.T) {
	he, pe := measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL
	rs := meshRun(1, 1)
	for _, src := range []string{"a", "b"} {
		for _, v := range []float64{190e-6, 200e-6, 210e-6} {
			rs = append(rs, sample(src, "ingress", he, lt, v), sample(src, "ingress", pe, lt, v*1.25))
		}
	}
	ovs := Overheads(Cells(rs))
	var ext *Overhead
	for i, o := range ovs {
		if o.Path == pe {
			ext = &ovs[i]
		}
		if o.Path == he {
			t.Errorf("host->external has an overhead (%v): it is a baseline", o.Ratio)
		}
	}
	if ext == nil || math.Abs(ext.Ratio-1.25) > 1e-9 || ext.Pairs != 2 {
		t.Fatalf("pod->external overhead %+v, want ratio 1.25 over 2 pairs", ext)
	}
	got := strings.Join(Sentences(ovs, ""), "\n")
	if !strings.Contains(got, "pod->external: latency x1.2 against host") || !strings.Contains(got, "pod->pod: bandwidth -9% against host, latency x1.5") {
		t.Errorf("sentences:\n%s", got)
	}
	for _, m := range Matrices(Cells(rs)) {
		if m.Path != pe {
			continue
		}
		if m.Cells["a"]["ingress"] == nil || m.Cells["b"]["ingress"] == nil {
			t.Errorf("pod->external matrix lacks node->target cells: %v", m.Cells)
		}
	}
}
