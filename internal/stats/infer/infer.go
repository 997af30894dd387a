// Package infer is meshperf's inference over repeated samples of one cell
// (node pair, path, test, parameters): order statistics from the raw
// samples (median, quartiles, IQR, min, max; never an average of
// percentiles), mean and sample standard deviation, the 95% confidence
// interval of the mean (Student t), and Welch's t-test for comparing two
// cells. It is apart from internal/stats because Student's t comes from
// gonum, which the agent must not link; only the coordinator's side
// imports it. Samples are in base units; the package does not care which.
package infer

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/meshperf/meshperf/internal/stats"
)

// Confidence is the level of every interval and test in this package.
const Confidence = 0.95

// Summary describes the samples of one cell. CI fields are set only when
// HasCI (N >= 2).
type Summary struct {
	// N is the number of samples.
	N int
	// Min, Q1, Median, Q3 and Max are order statistics of the samples
	// (quartiles by linear interpolation between closest ranks, as R's type
	// 7 and numpy's default; the median is stats.Median's).
	Min, Q1, Median, Q3, Max float64
	// IQR is Q3 - Q1.
	IQR float64
	// Mean is the arithmetic mean.
	Mean float64
	// StdDev is the sample standard deviation (n-1 in the denominator);
	// 0 for a single sample.
	StdDev float64
	// HasCI reports whether CILow and CIHigh are set (N >= 2).
	HasCI bool
	// CILow and CIHigh bound the 95% confidence interval of the mean:
	// mean -/+ t(0.975, N-1) * StdDev / sqrt(N).
	CILow, CIHigh float64
}

// Summarize computes the Summary of samples (in any order; not modified).
// It fails with stats.ErrNoSamples for none, and refuses NaN and infinities
// naming the sample.
func Summarize(samples []float64) (Summary, error) {
	n := len(samples)
	if n == 0 {
		return Summary{}, fmt.Errorf("summarize: %w", stats.ErrNoSamples)
	}
	for i, x := range samples {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Summary{}, fmt.Errorf("summarize: sample %d is %v", i, x)
		}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	sum := Summary{
		N: n, Min: s[0], Max: s[n-1],
		Q1: stats.QuantileSorted(s, 0.25), Median: stats.QuantileSorted(s, 0.5), Q3: stats.QuantileSorted(s, 0.75),
		Mean: mean(s),
	}
	sum.IQR = sum.Q3 - sum.Q1
	if n >= 2 {
		sum.StdDev = math.Sqrt(variance(s, sum.Mean))
		half := tCritical(float64(n-1)) * sum.StdDev / math.Sqrt(float64(n))
		sum.HasCI, sum.CILow, sum.CIHigh = true, sum.Mean-half, sum.Mean+half
	}
	return sum, nil
}

func mean(s []float64) float64 {
	var sum float64
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s))
}

// variance is the sample variance (n-1), computed from deviations so that
// large figures (bits per second) do not lose precision.
func variance(s []float64, m float64) float64 {
	var ss float64
	for _, x := range s {
		d := x - m
		ss += d * d
	}
	return ss / float64(len(s)-1)
}

// tCritical is the two-sided 95% critical value of Student's t with df
// degrees of freedom (df may be fractional, as Welch's is).
func tCritical(df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-Confidence)/2)
}

// Comparison is the outcome of Welch's t-test between two cells.
type Comparison struct {
	// MeanA and MeanB are the two means; Change is (MeanB-MeanA)/MeanA, a
	// ratio (0.1 = +10%); NaN if MeanA is 0.
	MeanA, MeanB, Change float64
	// T is Welch's t statistic, DF its Welch–Satterthwaite degrees of
	// freedom, P the two-sided p-value.
	T, DF, P float64
	// Significant reports P < 1 - Confidence.
	Significant bool
}

// Welch compares the means of a and b with Welch's unequal-variances
// t-test. Each side needs at least 2 samples (stats.ErrNoSamples otherwise). Two
// sides without any spread are significant exactly when their means differ.
func Welch(a, b []float64) (Comparison, error) {
	if len(a) < 2 || len(b) < 2 {
		return Comparison{}, fmt.Errorf("welch: %d and %d samples, need 2 each: %w", len(a), len(b), stats.ErrNoSamples)
	}
	sa, err := Summarize(a)
	if err != nil {
		return Comparison{}, fmt.Errorf("welch: side a: %w", err)
	}
	sb, err := Summarize(b)
	if err != nil {
		return Comparison{}, fmt.Errorf("welch: side b: %w", err)
	}
	c := Comparison{MeanA: sa.Mean, MeanB: sb.Mean, Change: math.NaN()}
	if sa.Mean != 0 {
		c.Change = (sb.Mean - sa.Mean) / sa.Mean
	}
	va := sa.StdDev * sa.StdDev / float64(sa.N)
	vb := sb.StdDev * sb.StdDev / float64(sb.N)
	if va+vb == 0 {
		c.Significant = sa.Mean != sb.Mean
		c.P = 1
		if c.Significant {
			c.P = 0
		}
		c.DF = float64(sa.N + sb.N - 2)
		return c, nil
	}
	c.T = (sb.Mean - sa.Mean) / math.Sqrt(va+vb)
	c.DF = (va + vb) * (va + vb) / (va*va/float64(sa.N-1) + vb*vb/float64(sb.N-1))
	c.P = 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: c.DF}.Survival(math.Abs(c.T))
	c.Significant = c.P < 1-Confidence
	return c, nil
}
