package stats

import (
	"math"
	"slices"
)

// The medians of this package. Two formulas exist on purpose, each kept
// for the figures it has always produced (stored results, goldens):
//
//   - Median, MedianSorted and MedianExcluding take the middle value of
//     the sorted samples, or the mean of the two middle values, (a+b)/2:
//     a ping result's median RTT, a report cell's figure, a chart point,
//     a diagnosis reference, a remote-write node sample, an overhead.
//   - InterpolatedMedian (and infer.Summary.Median, Quantile(xs, 0.5)) is the
//     0.5 quantile by linear interpolation, a+(b-a)/2: the per-node
//     gauges and the web mesh's reference.
//
// The two agree exactly when the two middle values are within a factor
// of two of each other, and otherwise at most in the last bit.

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
	return (s[n/2-1] + s[n/2]) / 2
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
	return (kth(m/2-1) + kth(m/2)) / 2
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

// InterpolatedMedian is the 0.5 quantile of xs (in any order; not
// modified) by linear interpolation between closest ranks, the formula of
// infer.Summary.Median and Quantile: for two middle values a <= b, a+(b-a)/2.
// It is NaN for no values and when any value is NaN or infinite.
func InterpolatedMedian(xs []float64) float64 {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return math.NaN()
		}
	}
	v, err := Quantile(xs, 0.5)
	if err != nil { // no values
		return math.NaN()
	}
	return v
}
