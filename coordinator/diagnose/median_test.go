package diagnose

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMedianExcluding: the median of all minus in, by order statistics,
// equals the median of the difference built by hand, duplicates included.
func TestMedianExcluding(t *testing.T) {
	tests := []struct {
		all, in []float64
		want    float64
	}{
		{[]float64{1, 2, 3, 4, 5}, []float64{5}, 2.5},
		{[]float64{1, 2, 3, 4, 5}, []float64{1, 2}, 4},
		{[]float64{1, 1, 1, 9}, []float64{1}, 1},
		{[]float64{1, 1, 9, 9}, []float64{1, 9}, 5},
	}
	for _, tt := range tests {
		if got := medianExcluding(tt.all, tt.in); got != tt.want {
			t.Errorf("medianExcluding(%v, %v) = %v, want %v", tt.all, tt.in, got, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 2 + r.IntN(30)
		all := make([]float64, n)
		for i := range all {
			all[i] = float64(r.IntN(8))
		}
		perm := r.Perm(n)
		k := 1 + r.IntN(n-1)
		var in, out []float64
		for i, p := range perm {
			if i < k {
				in = append(in, all[p])
			} else {
				out = append(out, all[p])
			}
		}
		slices.Sort(all)
		slices.Sort(in)
		if got, want := medianExcluding(all, in), median(out); got != want {
			t.Fatalf("medianExcluding(%v, %v) = %v, want %v", all, in, got, want)
		}
	}
}
