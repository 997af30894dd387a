package report

import (
	"slices"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

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
