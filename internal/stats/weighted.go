package stats

import (
	"math"
	"slices"
)

// Weighted is a value with the number of samples it stands for: a
// period's median RTT weighted by the probes that answered in it.
type Weighted struct {
	// V is the value, in any unit.
	V float64
	// W is its weight, a count.
	W uint64
}

// WeightedQuantile is the q quantile (0..1) of vs weighted by W: the
// smallest value at which the running weight reaches q of the total
// (never an interpolation). It sorts vs in place by V. It is NaN when the
// weights sum to 0 (no values included).
func WeightedQuantile(vs []Weighted, q float64) float64 {
	var total uint64
	for _, v := range vs {
		total += v.W
	}
	if total == 0 {
		return math.NaN()
	}
	slices.SortFunc(vs, func(a, b Weighted) int {
		switch {
		case a.V < b.V:
			return -1
		case a.V > b.V:
			return 1
		}
		return 0
	})
	target, acc := q*float64(total), 0.0
	for _, v := range vs {
		acc += float64(v.W)
		if acc >= target {
			return v.V
		}
	}
	return vs[len(vs)-1].V
}
