package stats

import (
	"math"
	"slices"
)

// The median of this package is one formula: the middle value of the
// sorted samples, or the mean (a+b)/2 of the two middle values. Median,
// MedianSorted, MedianExcluding and FiniteMedian compute it, and so does
// QuantileSorted at q = 0.5: a ping result's median RTT, a report cell's
// figure, a chart point, a diagnosis reference, a remote-write sample, an
// overhead, the per-node gauges, the web mesh's reference and the median
// of infer.Summary are one figure.

// Median is the median of xs (in any order; not modified): the middle
// value of the sorted values, or the mean (a+b)/2 of the two middle
// ones. It is NaN for no values. Values should be finite: a NaN sorts
// first (slices.Sort) and makes the answer meaningless.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return MedianSorted(s)
}

// MedianSorted is Median of s, which must be sorted in ascending order
// (not checked; not modified, not copied). It is NaN for no values.
func MedianSorted(s []float64) float64 {
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	// a/2 + b/2 is (a+b)/2 to the bit (halving is exact above the
	// subnormals), without the overflow of a+b past MaxFloat64.
	return s[n/2-1]/2 + s[n/2]/2
}

// MedianExcluding is the Median of the multiset all minus in, found by
// order statistics without building the difference: all and in must be
// sorted ascending, in a sub-multiset of all with fewer values than all
// (not checked). It costs O(log²(len(all))) comparisons, so a reference
// for each of n nodes over n² pairs costs O(n² log n), not n³.
func MedianExcluding(all, in []float64) float64 {
	m := len(all) - len(in)
	// kth is the k-th smallest (0-based) of the difference: the smallest
	// value of all with more than k values of the difference at or below it.
	kth := func(k int) float64 {
		lo, hi := 0, len(all)-1
		for lo < hi {
			mid := (lo + hi) / 2
			x := all[mid]
			if upper(all, x)-upper(in, x) > k {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return all[lo]
	}
	if m%2 == 1 {
		return kth(m / 2)
	}
	return kth(m/2-1)/2 + kth(m/2)/2 // as MedianSorted
}

// upper counts the values of sorted xs at or below x.
func upper(xs []float64, x float64) int {
	i, _ := slices.BinarySearchFunc(xs, x, func(e, t float64) int {
		if e <= t {
			return -1
		}
		return 1
	})
	return i
}

// FiniteMedian is Median of xs (in any order; not modified), or NaN when
// there are no values or any value is NaN or infinite: for figures that
// must not pass a bad sample on as a number (gauges, the web's reference).
func FiniteMedian(xs []float64) float64 {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return math.NaN()
		}
	}
	return Median(xs)
}
