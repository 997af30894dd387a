package stats

import (
	"math"
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
		if got := MedianExcluding(tt.all, tt.in); got != tt.want {
			t.Errorf("MedianExcluding(%v, %v) = %v, want %v", tt.all, tt.in, got, tt.want)
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
		if got, want := MedianExcluding(all, in), Median(out); got != want {
			t.Fatalf("MedianExcluding(%v, %v) = %v, want %v", all, in, got, want)
		}
	}
}

// TestMedians pins the contract of the medians: NaN for none, the middle
// value or the mean (a+b)/2 of the two middle values, input left alone;
// FiniteMedian refuses a NaN or infinite value, and the 0.5 quantile is
// the same figure to the last bit (a+(b-a)/2 would differ).
func TestMedians(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name           string
		xs             []float64
		median, finite float64 // NaN: want NaN
	}{
		{"none", nil, nan, nan},
		{"one", []float64{3}, 3, 3},
		{"odd, unsorted", []float64{5, 1, 3}, 3, 3},
		{"even, unsorted", []float64{4, 1, 2, 3}, 2.5, 2.5},
		{"(a+b)/2, not a+(b-a)/2", []float64{0.7, 0.1}, 0.39999999999999997, 0.39999999999999997},
		{"infinite: finite refuses", []float64{1, math.Inf(1), 2}, 2, nan},
		{"huge: no overflow", []float64{math.MaxFloat64, math.MaxFloat64}, math.MaxFloat64, math.MaxFloat64},
	}
	same := func(got, want float64) bool { return got == want || math.IsNaN(got) && math.IsNaN(want) }
	for _, tt := range tests {
		in := slices.Clone(tt.xs)
		if got := Median(in); !same(got, tt.median) {
			t.Errorf("%s: Median(%v) = %v, want %v", tt.name, tt.xs, got, tt.median)
		}
		if got := FiniteMedian(in); !same(got, tt.finite) {
			t.Errorf("%s: FiniteMedian(%v) = %v, want %v", tt.name, tt.xs, got, tt.finite)
		}
		if got, err := Quantile(in, 0.5); len(in) > 0 && (err != nil || !same(got, tt.median)) {
			t.Errorf("%s: Quantile(%v, 0.5) = %v, %v; want %v", tt.name, tt.xs, got, err, tt.median)
		}
		if !slices.Equal(in, tt.xs) {
			t.Errorf("%s: input changed to %v", tt.name, in)
		}
		sorted := slices.Sorted(slices.Values(tt.xs))
		if got := MedianSorted(sorted); !same(got, tt.median) {
			t.Errorf("%s: MedianSorted(%v) = %v, want %v", tt.name, sorted, got, tt.median)
		}
	}
}
