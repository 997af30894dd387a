package testcell

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/stats/infer"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Delta compares one cell between two runs.
type Delta struct {
	// Key is the cell (same node pair, path, test and parameters in both runs).
	Key CellKey
	// Label is the cell's parameter label.
	Label string
	// A and B are the cell in the first and the second run; either may be
	// nil when only one run has it.
	A, B *Cell
	// MedianChange is median(B)/median(A) - 1; NaN without both medians.
	MedianChange float64
	// Test is Welch's t-test on the samples.
	Test infer.Comparison
	// Tested is false when either side has fewer than 2 samples (then
	// nothing is significant).
	Tested bool
	// Worse is set when B is significantly worse than A (lower throughput,
	// higher latency or time); Better when significantly better.
	Worse, Better bool
}

// Verdict names what the comparison found: "not tested" (too few
// samples on a side), "worse", "better" or "same" (no significant
// change). The web UI, the CLI's table and its CSV say it this way; the
// table writes "worse" in capitals.
func (d Delta) Verdict() string {
	switch {
	case !d.Tested:
		return "not tested"
	case d.Worse:
		return "worse"
	case d.Better:
		return "better"
	}
	return "same"
}

// Tally counts the deltas whose verdict is worse and better.
func Tally(deltas []Delta) (worse, better int) {
	for _, d := range deltas {
		switch d.Verdict() {
		case "worse":
			worse++
		case "better":
			better++
		}
	}
	return worse, better
}

// Compare matches the cells of two runs and compares each pair, sorted as
// Cells sorts. Cells present in one run only are listed with the other side
// nil.
func Compare(a, b []*Cell) []Delta {
	byKey := map[CellKey]*Delta{}
	for _, c := range a {
		byKey[c.CellKey] = &Delta{Key: c.CellKey, Label: c.Label, A: c}
	}
	for _, c := range b {
		d := byKey[c.CellKey]
		if d == nil {
			d = &Delta{Key: c.CellKey, Label: c.Label}
			byKey[c.CellKey] = d
		}
		d.B = c
	}
	out := make([]Delta, 0, len(byKey))
	for _, d := range byKey {
		d.MedianChange = math.NaN()
		if d.A != nil && d.B != nil && len(d.A.Samples) > 0 && len(d.B.Samples) > 0 && d.A.Stats.Median != 0 {
			d.MedianChange = d.B.Stats.Median/d.A.Stats.Median - 1
		}
		if d.A != nil && d.B != nil {
			cmpRes, err := infer.Welch(d.A.Samples, d.B.Samples)
			if err == nil {
				d.Test, d.Tested = cmpRes, true
			} else if !errors.Is(err, stats.ErrNoSamples) {
				d.Tested = false
			}
		}
		if d.Tested && d.Test.Significant {
			up := d.Test.MeanB > d.Test.MeanA
			if up == HigherIsBetter(d.Key.Test) {
				d.Better = true
			} else {
				d.Worse = true
			}
		}
		out = append(out, *d)
	}
	slices.SortFunc(out, func(x, y Delta) int {
		a, b := x.Key, y.Key
		return cmp.Or(cmp.Compare(a.Test, b.Test), cmp.Compare(a.Params, b.Params), cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Family, b.Family))
	})
	return out
}

// WorseBy reports whether d is significantly worse by more than pct
// percent of A's median (throughput down, latency up).
func (d Delta) WorseBy(pct float64) bool {
	if !d.Worse || math.IsNaN(d.MedianChange) {
		return false
	}
	change := 100 * d.MedianChange
	if HigherIsBetter(d.Key.Test) {
		return -change > pct
	}
	return change > pct
}

// AllPairs stands for "every node pair" in the cells of ByPath.
const AllPairs = "*"

// ByPath merges the cells of each (test, parameters, path) over node
// pairs: a merged cell's samples are the pairs' medians, its source and
// destination AllPairs. Comparing runs by path needs no repeats: the node
// pairs are the samples ("is pod->pod slower over vxlan than over
// host-gw, across the cluster?").
func ByPath(cells []*Cell) []*Cell {
	merged := Group(cells, matrixKeyOf,
		func(c *Cell) *Cell {
			return &Cell{CellKey: CellKey{Src: AllPairs, Dst: AllPairs, Path: c.Path, Test: c.Test, Params: c.Params, Family: c.Family},
				Label: c.Label, MsgSizeBytes: c.MsgSizeBytes, Failed: map[measurev1.Status]int{}}
		},
		func(m, c *Cell) {
			if len(c.Samples) > 0 {
				m.Samples = append(m.Samples, c.Stats.Median)
			}
			for st, n := range c.Failed {
				m.Failed[st] += n
			}
		}).Groups()
	for _, m := range merged {
		if len(m.Samples) > 0 {
			m.Stats, _ = infer.Summarize(m.Samples)
		}
	}
	return merged
}

// CompareFamilies compares, within one run's cells, each IPv6 cell with
// the IPv4 cell of the same node pair (or AllPairs), path, test and
// parameters: A is IPv4, B is IPv6, so MedianChange is the IPv6 overhead
// against IPv4 and Worse means IPv6 is significantly worse. Deltas keep
// the IPv4 key, B its IPv6 cell; cells of one family only are left out.
func CompareFamilies(cells []*Cell) []Delta {
	var v4, v6 []*Cell
	orig := map[*Cell]*Cell{} // the IPv4-keyed copies of the IPv6 cells, to the cells
	for _, c := range cells {
		switch c.Family {
		case measurev1.IPFamily_IP_FAMILY_IPV4:
			v4 = append(v4, c)
		case measurev1.IPFamily_IP_FAMILY_IPV6:
			as4 := *c
			as4.Family = measurev1.IPFamily_IP_FAMILY_IPV4
			v6 = append(v6, &as4)
			orig[&as4] = c
		}
	}
	var out []Delta
	for _, d := range Compare(v4, v6) {
		if d.A != nil && d.B != nil {
			d.B = orig[d.B]
			out = append(out, d)
		}
	}
	return out
}
