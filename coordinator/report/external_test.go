package report

import (
	"math"
	"slices"
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

// TestColumnsNodeRowsFirst checks that the columns follow the node pairs'
// test order, whichever way the external rows sort among them.
func TestColumnsNodeRowsFirst(t *testing.T) {
	ping, lat, http := measurev1.Test_TEST_PING, measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_HTTP
	ext := &PairPath{Src: "node-1", Dst: "lab-ext", Path: measurev1.Path_PATH_HOST_TO_EXTERNAL, Tests: []measurev1.Test{ping, http}}
	node := &PairPath{Src: "node-1", Dst: "node-2", Path: measurev1.Path_PATH_HOST_TO_HOST, Tests: []measurev1.Test{ping, lat, http}}
	tests := []struct {
		name string
		rows []*PairPath
		want []measurev1.Test
	}{
		{"external row first", []*PairPath{ext, node}, []measurev1.Test{ping, lat, http}},
		{"node row first", []*PairPath{node, ext}, []measurev1.Test{ping, lat, http}},
		{"only external", []*PairPath{ext}, []measurev1.Test{ping, http}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Columns(tt.rows); !slices.Equal(got, tt.want) {
				t.Errorf("Columns = %v, want %v", got, tt.want)
			}
		})
	}
}
