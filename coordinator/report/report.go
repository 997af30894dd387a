// Package report formats a run and its results as an operator reads them:
// one row per node pair and path with a cell per test, the verdict of each
// pair-path (every planned test OK, or what failed), and the values in
// human units. Conversions from base units happen here, at the edge, only.
// The figures it formats (headlines, cells, their statistics) are
// internal/testcell's; the names (tests, paths, statuses) internal/testspec's.
package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// PairPath is one (source node, destination node, path) of a run with its
// results per test.
type PairPath struct {
	// Src and Dst are the client's and the server's node.
	Src, Dst string
	// Path is the row's path.
	Path measurev1.Path
	// Family is the row's IP family, IPv4 or IPv6 (never unspecified: a
	// test planned without one, and results stored before families, are
	// IPv4).
	Family measurev1.IPFamily
	// Tests are the tests planned for the row, in the run's order.
	Tests []measurev1.Test
	// Results holds every result of the row by test.
	Results map[measurev1.Test][]*measurev1.Result
	// Planned counts planned tests (dispatches) of the row by test.
	Planned map[measurev1.Test]int
}

// GetPath is p.Path, and GetDstNode p.Dst: a PairPath is a
// testspec.Routed, whose destination testspec reads.
func (p *PairPath) GetPath() measurev1.Path { return p.Path }

// GetDstNode is p.Dst (see GetPath).
func (p *PairPath) GetDstNode() string { return p.Dst }

// OK reports whether every planned test of the row has all its results OK.
func (p *PairPath) OK() bool { return len(p.Problems()) == 0 }

// Problems lists what is wrong with the row: failed results with their
// status and message (on one line, control characters escaped:
// safetext.Line), and planned tests without a result ("missing").
func (p *PairPath) Problems() []string {
	var out []string
	for _, t := range p.Tests {
		tests := map[string]bool{}
		for _, r := range p.Results[t] {
			tests[r.GetTestId()] = true
			switch _, ok := testcell.Measured(r); {
			case r.GetStatus() != measurev1.Status_STATUS_OK:
				out = append(out, fmt.Sprintf("%s: %s: %s", testspec.Name(t), testspec.StatusName(r.GetStatus()), safetext.Line(r.GetMessage())))
			case !ok:
				out = append(out, fmt.Sprintf("%s: %s: an OK result without a finite, non-negative figure", testspec.Name(t), testspec.StatusName(testcell.StatusOf(r))))
			}
		}
		if missing := p.Planned[t] - len(tests); missing > 0 {
			out = append(out, fmt.Sprintf("%s: missing: %d of %d planned tests have no result", testspec.Name(t), missing, p.Planned[t]))
		}
	}
	return out
}

// Notes lists what OK results of the row say in their message: a tool's
// error and exit status after a complete result, replies from other
// addresses, local send failures, estimated figures ("ping: ping exited 2
// after a complete result: ..."). Identical notes of one test are listed
// once. Control characters are escaped (safetext.Escape: \x1b), since
// the words come from agents and tools.
func (p *PairPath) Notes() []string {
	var out []string
	for _, t := range p.Tests {
		seen := map[string]bool{}
		for _, r := range p.Results[t] {
			if r.GetStatus() != measurev1.Status_STATUS_OK || r.GetMessage() == "" || seen[r.GetMessage()] {
				continue
			}
			seen[r.GetMessage()] = true
			out = append(out, fmt.Sprintf("%s: %s", testspec.Name(t), safetext.Escape(r.GetMessage())))
		}
	}
	return out
}

// Build groups a run's results by pair-path, with a row for every planned
// pair-path even if no result arrived. Rows are sorted by source, destination
// and path.
func Build(run *measurev1.Run, results []*measurev1.Result) []*PairPath {
	type key struct {
		src, dst string
		path     measurev1.Path
		family   measurev1.IPFamily
	}
	rows := map[key]*PairPath{}
	get := func(k key) *PairPath {
		p := rows[k]
		if p == nil {
			p = &PairPath{Src: k.src, Dst: k.dst, Path: k.path, Family: k.family, Results: map[measurev1.Test][]*measurev1.Result{}, Planned: map[measurev1.Test]int{}}
			rows[k] = p
		}
		return p
	}
	// A test planned without a family (an external target's, a run of
	// before families) is in its results' family: the coordinator sets it
	// from the address the agent sent to.
	resultFamily := map[string]measurev1.IPFamily{}
	for _, r := range results {
		if _, ok := resultFamily[r.GetTestId()]; !ok {
			resultFamily[r.GetTestId()] = protocol.ResultFamily(r.GetIpFamily())
		}
	}
	for _, pt := range run.GetPlanned() {
		fam := pt.GetIpFamily()
		if fam == measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
			fam = resultFamily[pt.GetTestId()]
		}
		p := get(key{pt.GetSrcNode(), pt.GetDstNode(), pt.GetPath(), protocol.ResultFamily(fam)})
		t := pt.GetSpec().GetTest()
		if p.Planned[t] == 0 {
			p.Tests = append(p.Tests, t)
		}
		p.Planned[t]++
	}
	for _, r := range results {
		p := get(key{r.GetSrcNode(), r.GetDstNode(), r.GetPath(), protocol.ResultFamily(r.GetIpFamily())})
		t := r.GetSpec().GetTest()
		if p.Planned[t] == 0 && len(p.Results[t]) == 0 {
			p.Tests = append(p.Tests, t)
		}
		p.Results[t] = append(p.Results[t], r)
	}
	out := make([]*PairPath, 0, len(rows))
	for _, p := range rows {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *PairPath) int {
		return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Family, b.Family))
	})
	return out
}

// RowsIPv6 reports whether any row is IPv6: then tables show a family
// column.
func RowsIPv6(rows []*PairPath) bool {
	for _, p := range rows {
		if p.Family == measurev1.IPFamily_IP_FAMILY_IPV6 {
			return true
		}
	}
	return false
}

// Summary counts rows: ok of total pair-paths have every test OK.
func Summary(rows []*PairPath) (ok, total int) {
	for _, p := range rows {
		if p.OK() {
			ok++
		}
	}
	return ok, len(rows)
}

// SummaryLine is the verdict line: "N/N pair-paths OK" or
// "K/N pair-paths OK, F failed".
func SummaryLine(rows []*PairPath) string {
	ok, total := Summary(rows)
	return VerdictLine(ok, total)
}

// VerdictLine is SummaryLine of counts: ok pair-paths OK of total ("N/N
// pair-paths OK", "K/N pair-paths OK, F failed"); the demo says it over
// several runs.
func VerdictLine(ok, total int) string {
	if ok == total {
		return fmt.Sprintf("%d/%d pair-paths OK", ok, total)
	}
	return fmt.Sprintf("%d/%d pair-paths OK, %d failed", ok, total, total-ok)
}

// Columns returns the tests that appear in any row, in first-seen order,
// the rows of node paths first: external targets run mostly ping and HTTP
// (iperf3 and qperf only to a target with servers), and their rows (sorted
// among the others by target name) must not move HTTP ahead of the tests
// the node pairs run.
func Columns(rows []*PairPath) []measurev1.Test {
	var cols []measurev1.Test
	node, target := testspec.Split(rows)
	for _, p := range slices.Concat(node, target) {
		for _, t := range p.Tests {
			if !slices.Contains(cols, t) {
				cols = append(cols, t)
			}
		}
	}
	return cols
}

// Cell formats a row's results of one test: the headline figure of each OK
// result (its median over repeats, per qperf message size) or the status of
// failures; "-" if the test is not planned for the row. A ping cell with
// loss above zero says so after the RTT: "1.2ms loss 40%" (PingLoss).
func (p *PairPath) Cell(t measurev1.Test) string {
	rs := p.Results[t]
	if len(rs) == 0 {
		if p.Planned[t] > 0 {
			return "missing"
		}
		return "-"
	}
	var failed []string
	bySize := map[uint64][]float64{}
	var sizes []uint64
	for _, r := range rs {
		v, ok := testcell.Measured(r)
		if !ok {
			failed = append(failed, testspec.StatusName(testcell.StatusOf(r)))
			continue
		}
		size := r.GetQperf().GetMsgSizeBytes()
		if _, seen := bySize[size]; !seen {
			sizes = append(sizes, size)
		}
		bySize[size] = append(bySize[size], v)
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return strings.Join(slices.Compact(failed), ",")
	}
	slices.Sort(sizes)
	parts := make([]string, 0, len(sizes))
	for _, s := range sizes {
		v := FormatHeadline(t, stats.Median(bySize[s]))
		if len(sizes) > 1 {
			v = testcell.FormatBytes(s) + ":" + v
		}
		parts = append(parts, v)
	}
	if loss := testcell.PingLoss(rs); loss > 0 {
		parts = append(parts, FormatLoss(loss))
	}
	return strings.Join(parts, " ")
}

// FormatLoss formats a loss ratio (0..1) as "loss 40%", with at most 3
// significant digits ("loss 33.3%") and never rounded to 0 ("loss 0.01%"
// for 1 in 10,000; "loss <0.001%" below 1 in 100,000).
func FormatLoss(ratio float64) string {
	pct := ratio * 100
	if pct < 0.001 {
		return "loss <0.001%"
	}
	return "loss " + strconv.FormatFloat(pct, 'g', 3, 64) + "%"
}

// LoadSummary is an http_load result's figures on one line: "1.43k req/s,
// p50 7ms, p99 17ms, 10/2000 failed"; "" for other results.
func LoadSummary(r *measurev1.Result) string {
	m := r.GetHttpLoad()
	if m == nil {
		return ""
	}
	return fmt.Sprintf("%s req/s, p50 %s, p99 %s, %d/%d failed", FormatCount(m.GetRequestsPerSecond()),
		FormatSeconds(m.GetLatencyP50Seconds()), FormatSeconds(m.GetLatencyP99Seconds()), m.GetFailedRequests(), m.GetRequests())
}

// FormatHeadline formats a Headline value of test t in human units:
// bit/s for a throughput, seconds for a time (testcell.Unit).
func FormatHeadline(t measurev1.Test, v float64) string {
	if testcell.HigherIsBetter(t) {
		return FormatBitsPerSecond(v)
	}
	return FormatSeconds(v)
}

// Invalid is how a figure that is not a finite number shows.
const Invalid = "invalid"

// FormatCount formats a rate or count with 3 significant digits and a k
// or M suffix: "950", "1.43k", "2.5M"; NaN and infinities are Invalid.
func FormatCount(v float64) string {
	return formatScaled(v, []scale{{1e6, "M"}, {1e3, "k"}, {1, ""}})
}

// FormatSeconds formats seconds as ns, µs, ms or s with 3 significant
// digits; NaN and infinities are Invalid, never a number.
func FormatSeconds(s float64) string {
	return formatScaled(s, []scale{{1, "s"}, {1e-3, "ms"}, {1e-6, "µs"}, {1e-9, "ns"}})
}

// FormatBitsPerSecond formats bit/s with a decimal prefix: "9.41 Gbit/s";
// NaN and infinities are Invalid, never a number.
func FormatBitsPerSecond(bps float64) string {
	return formatScaled(bps, []scale{{1e9, " Gbit/s"}, {1e6, " Mbit/s"}, {1e3, " kbit/s"}, {1, " bit/s"}})
}

// scale is one step of a unit ladder: a figure of at least unit is shown
// in that unit, with suffix.
type scale struct {
	unit   float64
	suffix string
}

// formatScaled formats v with 3 significant digits in the first unit of
// ladder (largest first) that v reaches, else in the last one (zero,
// negative and tiny figures); NaN and infinities are Invalid.
func formatScaled(v float64, ladder []scale) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Invalid
	}
	sc := ladder[len(ladder)-1]
	for _, step := range ladder {
		if v >= step.unit {
			sc = step
			break
		}
	}
	if sc.unit < 1 {
		return fmt.Sprintf("%.3g%s", v*math.Round(1/sc.unit), sc.suffix) // v*1e3 for ms: exact where v/1e-3 is not
	}
	return fmt.Sprintf("%.3g%s", v/sc.unit, sc.suffix)
}
