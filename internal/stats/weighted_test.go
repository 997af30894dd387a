package stats

import "testing"

// TestWeightedQuantile: the median of weighted values, and NaN without weight.
func TestWeightedQuantile(t *testing.T) {
	tests := []struct {
		in   []Weighted
		want float64
	}{
		{[]Weighted{{1, 1}, {2, 1}, {3, 1}}, 2},
		{[]Weighted{{1, 10}, {5, 1}}, 1},
		{[]Weighted{{1, 1}, {5, 10}}, 5},
	}
	for _, tt := range tests {
		if got := WeightedQuantile(tt.in, 0.5); got != tt.want {
			t.Errorf("WeightedQuantile(%v, 0.5) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := WeightedQuantile([]Weighted{{1, 0}}, 0.5); got == got {
		t.Errorf("WeightedQuantile without weight = %v, want NaN", got)
	}
}
