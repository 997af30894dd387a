package cli

import (
	"testing"

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
