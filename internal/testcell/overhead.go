package testcell

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Subject is what a Matrix or an Overhead is about: one test with its
// parameters, on one path, in one IP family.
type Subject struct {
	// Test is the test.
	Test measurev1.Test
	// Params is the canonical text of its parameters, as in CellKey.
	Params string
	// Label is their short form, as in Cell.
	Label string
	// MsgSizeBytes is the qperf message size; 0 for other tools.
	MsgSizeBytes uint64
	// Path is the path.
	Path measurev1.Path
	// Family is the IP family.
	Family measurev1.IPFamily
}

// subjectOf is the Subject of c's matrix.
func subjectOf(c *Cell) Subject {
	return Subject{Test: c.Test, Params: c.Params, Label: c.Label, MsgSizeBytes: c.MsgSizeBytes, Path: c.Path, Family: c.Family}
}

// Matrix is one test (with its parameters) on one path: the median of
// every node pair's cell, source by destination.
type Matrix struct {
	// Subject is the test, parameters, path and IP family of its cells.
	Subject
	// Nodes are the row and column names, sorted.
	Nodes []string
	// Cells maps [src][dst] to the cell; a missing pair is absent.
	Cells map[string]map[string]*Cell
}

// matrixKey is what the cells of one matrix share: test, parameters,
// path and family (every node pair of them).
type matrixKey struct {
	test   measurev1.Test
	params string
	path   measurev1.Path
	family measurev1.IPFamily
}

func matrixKeyOf(c *Cell) matrixKey { return matrixKey{c.Test, c.Params, c.Path, c.Family} }

// Matrices arranges cells by test, parameters and path.
func Matrices(cells []*Cell) []*Matrix {
	out := Group(cells, matrixKeyOf,
		func(c *Cell) *Matrix {
			return &Matrix{Subject: subjectOf(c), Cells: map[string]map[string]*Cell{}}
		},
		func(m *Matrix, c *Cell) {
			for _, n := range []string{c.Src, c.Dst} {
				if !slices.Contains(m.Nodes, n) {
					m.Nodes = append(m.Nodes, n)
				}
			}
			if m.Cells[c.Src] == nil {
				m.Cells[c.Src] = map[string]*Cell{}
			}
			m.Cells[c.Src][c.Dst] = c
		}).Groups()
	for _, m := range out {
		slices.Sort(m.Nodes)
	}
	return out
}

// Title names the matrix: "qperf_tcp_lat 64B, pod-pod" (", pod-pod ipv6"
// for IPv6).
func (m *Matrix) Title() string {
	t := testspec.Name(m.Test)
	if m.Label != "" {
		t += " " + m.Label
	}
	return t + ", " + testspec.PathName(m.Path) + FamilySuffix(m.Family)
}

// Overhead is how a path compares with its Baseline (host->host, or
// host->external for pod->external) for one test: per pair (a node and a
// target on the external paths), the ratio of the path's median to the
// baseline's median on the same pair; then the median of those ratios.
type Overhead struct {
	// Subject is the test with its parameters, the path compared with
	// its Baseline (host->host, or host->external for pod->external), and
	// the IP family of the path and of its baseline.
	Subject
	// Ratio is the median over pairs of median(path)/median(baseline).
	Ratio float64
	// Pairs is the number of pairs both paths have samples for.
	Pairs int
}

// Change is Ratio as a relative change: -0.09 is 9% less than the host.
func (o Overhead) Change() float64 { return o.Ratio - 1 }

// Words says the overhead as an operator does: "bandwidth -9%" for
// throughput tests, "latency x1.5" for latency and time.
func (o Overhead) Words() string {
	if HigherIsBetter(o.Test) {
		return fmt.Sprintf("bandwidth %+.0f%%", 100*o.Change())
	}
	return fmt.Sprintf("latency x%.2g", o.Ratio)
}

// Baseline is the path another path's overhead is measured against:
// host->external for the external paths (pod->external against it is the
// cost of leaving the cluster from a pod), host->host for the others.
func Baseline(p measurev1.Path) measurev1.Path { return testspec.KindOf(p).Baseline() }

// Overheads computes, for every test and path other than a baseline, the
// overhead against its Baseline (host->host, or host->external for
// pod->external) over the same source and destination, in the same IP
// family. Paths without a baseline pair are left out.
func Overheads(cells []*Cell) []Overhead {
	type key struct {
		test   measurev1.Test
		params string
		base   measurev1.Path
		family measurev1.IPFamily
	}
	base := map[key]map[[2]string]float64{}
	for _, c := range cells {
		if Baseline(c.Path) == c.Path && len(c.Samples) > 0 && c.Stats.Median > 0 {
			k := key{c.Test, c.Params, c.Path, c.Family}
			if base[k] == nil {
				base[k] = map[[2]string]float64{}
			}
			base[k][[2]string{c.Src, c.Dst}] = c.Stats.Median
		}
	}
	type okey struct {
		key
		path measurev1.Path
	}
	ratios := map[okey][]float64{}
	subjects := map[okey]Subject{}
	for _, c := range cells {
		if Baseline(c.Path) == c.Path || len(c.Samples) == 0 {
			continue
		}
		k := key{c.Test, c.Params, Baseline(c.Path), c.Family}
		b, ok := base[k][[2]string{c.Src, c.Dst}]
		if !ok {
			continue
		}
		ok2 := okey{k, c.Path}
		ratios[ok2] = append(ratios[ok2], c.Stats.Median/b)
		subjects[ok2] = subjectOf(c)
	}
	out := make([]Overhead, 0, len(ratios))
	for k, rs := range ratios {
		out = append(out, Overhead{Subject: subjects[k], Ratio: stats.Median(rs), Pairs: len(rs)})
	}
	slices.SortFunc(out, func(a, b Overhead) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Family, b.Family), cmp.Compare(a.Test, b.Test),
			cmp.Compare(a.MsgSizeBytes, b.MsgSizeBytes), cmp.Compare(a.Params, b.Params))
	})
	return out
}

// Sentences says, per path, how it compares with the host network in one
// line: "pod->pod over vxlan: bandwidth -9% against host, latency x1.5".
// Bandwidth comes from the first throughput test of iperf3 TCP, qperf
// tcp_bw, iperf3 UDP, qperf udp_bw that the path has; latency from qperf
// tcp_lat, ping, qperf udp_lat, HTTP; with several parameters (a sweep),
// the median of their ratios. label (the run's label, e.g. the CNI mode) is
// added when not empty.
func Sentences(overheads []Overhead, label string) []string {
	prefer := []measurev1.Test{
		measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_QPERF_TCP_BW, measurev1.Test_TEST_IPERF3_UDP, measurev1.Test_TEST_QPERF_UDP_BW,
		measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_PING, measurev1.Test_TEST_QPERF_UDP_LAT, measurev1.Test_TEST_HTTP,
	}
	type pathFamily struct {
		path   measurev1.Path
		family measurev1.IPFamily
	}
	type key struct {
		pathFamily
		test measurev1.Test
	}
	ratios := map[key][]float64{}
	var paths []pathFamily
	for _, o := range overheads {
		if math.IsNaN(o.Ratio) {
			continue
		}
		pf := pathFamily{o.Path, protocol.ResultFamily(o.Family)}
		if !slices.Contains(paths, pf) {
			paths = append(paths, pf)
		}
		k := key{pf, o.Test}
		ratios[k] = append(ratios[k], o.Ratio)
	}
	slices.SortFunc(paths, func(a, b pathFamily) int { return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.family, b.family)) })
	var lines []string
	for _, pf := range paths {
		p := pf.path
		var parts []string
		for _, wantBW := range []bool{true, false} {
			for _, t := range prefer {
				if rs := ratios[key{pf, t}]; HigherIsBetter(t) == wantBW && len(rs) > 0 {
					parts = append(parts, Overhead{Subject: Subject{Test: t}, Ratio: stats.Median(rs)}.Words())
					break
				}
			}
		}
		if len(parts) == 0 {
			continue
		}
		name := strings.Replace(testspec.PathName(p), "-", "->", 1) + FamilySuffix(pf.family)
		if label != "" {
			name += " over " + label
		}
		parts[0] += " against host"
		lines = append(lines, fmt.Sprintf("%s: %s", name, strings.Join(parts, ", ")))
	}
	return lines
}
