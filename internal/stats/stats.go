// Package stats owns meshperf's statistics that need no distribution
// tables, for the coordinator and the agent alike: every median of the
// project, one formula (Median, MedianSorted, MedianExcluding,
// FiniteMedian; median.go), quantiles by linear
// interpolation (Quantile, QuantileSorted) and the weighted quantile of
// counted values (WeightedQuantile). The inference over repeated samples
// of one cell (order statistics with the mean's confidence interval,
// Welch's t-test) lives in internal/stats/infer, which needs Student's t
// from gonum: the agent imports only this package and does not link
// gonum. Samples are in base units; the package does not care which.
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrNoSamples means a summary or test was asked of too few samples.
var ErrNoSamples = errors.New("not enough samples")

// Quantile returns the q-quantile (0..1) of samples by linear
// interpolation between closest ranks. It fails with ErrNoSamples for none
// and names a q outside 0..1.
func Quantile(samples []float64, q float64) (float64, error) {
	if len(samples) == 0 {
		return 0, fmt.Errorf("quantile: %w", ErrNoSamples)
	}
	if !(q >= 0 && q <= 1) {
		return 0, fmt.Errorf("quantile: q %v is outside 0..1", q)
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return QuantileSorted(s, q), nil
}

// QuantileSorted is the q-quantile (0..1) of s, which must be sorted in
// ascending order and not empty, by linear interpolation between closest
// ranks (R's type 7, numpy's default); at q = 0.5 it is MedianSorted,
// whose (a+b)/2 the interpolation's a+(b-a)/2 matches up to the last bit.
// It does not check its arguments: Quantile does.
func QuantileSorted(s []float64, q float64) float64 {
	if q == 0.5 {
		return MedianSorted(s) // the package's one median
	}
	h := q * float64(len(s)-1)
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}

// LossRatio is the share of what was sent (probes, echo requests,
// datagrams) that got no answer: (sent - received) / sent, in 0..1. It is
// NaN when nothing was sent, or when received is above sent, counts no
// loss can be read from (sanity refuses them where they arrive).
func LossRatio(sent, received uint64) float64 {
	if sent == 0 || received > sent {
		return math.NaN()
	}
	return float64(sent-received) / float64(sent)
}
