package testcell

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/stats/infer"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// CellKey identifies a cell: what was measured, where, and how. Two results
// with the same key are samples of the same thing.
type CellKey struct {
	// Src and Dst are the client's and the server's node.
	Src, Dst string
	// Path is the path.
	Path measurev1.Path
	// Test is the test.
	Test measurev1.Test
	// Params is the canonical text of the test's parameters (message size,
	// duration, streams, ...): different parameters, different cell.
	Params string
	// Family is the IP family, IPv4 or IPv6 (never unspecified: results
	// stored before families are IPv4, protocol.ResultFamily).
	Family measurev1.IPFamily
}

// GetPath is k.Path, and GetDstNode k.Dst: a CellKey (and a Cell) is a
// testspec.Routed, whose destination testspec reads.
func (k CellKey) GetPath() measurev1.Path { return k.Path }

// GetDstNode is k.Dst (see GetPath).
func (k CellKey) GetDstNode() string { return k.Dst }

// Cell is the samples of one CellKey and their statistics.
type Cell struct {
	CellKey
	// Label is a short form of the parameters that tell cells of one test
	// apart in a table: the qperf message size, the iperf3 streams and block
	// size; "" when the defaults of the test.
	Label string
	// MsgSizeBytes is the qperf message size of the cell; 0 for other tools.
	MsgSizeBytes uint64
	// Samples are the headline figures of the measurements (Measured: OK
	// results with a finite, non-negative headline), in base units, in
	// result order.
	Samples []float64
	// Failed counts the results that are not samples, by status (a busy or
	// failed run is never a number in the statistics); an OK result with
	// a figure that is not finite counts as STATUS_INVALID.
	Failed map[measurev1.Status]int
	// Stats summarizes Samples; valid when len(Samples) > 0.
	Stats infer.Summary
}

// Cells groups results into cells, sorted by test, parameters, path,
// source and destination.
func Cells(results []*measurev1.Result) []*Cell {
	byKey := map[CellKey]*Cell{}
	for _, r := range results {
		k := KeyOf(r)
		c := byKey[k]
		if c == nil {
			c = &Cell{CellKey: k, Label: Label(r.GetSpec()), Failed: map[measurev1.Status]int{}}
			if sizes := r.GetSpec().GetQperf().GetMsgSizeBytes(); len(sizes) == 1 {
				c.MsgSizeBytes = sizes[0]
			}
			byKey[k] = c
		}
		if v, ok := Measured(r); ok {
			c.Samples = append(c.Samples, v)
		} else {
			c.Failed[StatusOf(r)]++
		}
	}
	out := make([]*Cell, 0, len(byKey))
	for _, c := range byKey {
		if len(c.Samples) > 0 {
			c.Stats, _ = infer.Summarize(c.Samples) // finite: Measured
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Cell) int {
		return cmp.Or(cmp.Compare(a.Test, b.Test), cmp.Compare(a.MsgSizeBytes, b.MsgSizeBytes), cmp.Compare(a.Params, b.Params),
			cmp.Compare(a.Path, b.Path), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Family, b.Family))
	})
	return out
}

// KeyOf returns the cell a result belongs to.
func KeyOf(r *measurev1.Result) CellKey {
	return CellKey{Src: r.GetSrcNode(), Dst: r.GetDstNode(), Path: r.GetPath(), Test: r.GetSpec().GetTest(), Params: ParamsKey(r.GetSpec()),
		Family: protocol.ResultFamily(r.GetIpFamily())}
}

// FamilySuffix is "" for IPv4 and " ipv6" for IPv6: what titles add, so
// that an IPv4-only run reads as it did before families.
func FamilySuffix(f measurev1.IPFamily) string {
	if protocol.ResultFamily(f) == measurev1.IPFamily_IP_FAMILY_IPV4 {
		return ""
	}
	return " " + protocol.FamilyName(f)
}

// AnyIPv6 reports whether any cell is IPv6: then tables show a family
// column.
func AnyIPv6(cells ...[]*Cell) bool {
	for _, cs := range cells {
		for _, c := range cs {
			if c.Family == measurev1.IPFamily_IP_FAMILY_IPV6 {
				return true
			}
		}
	}
	return false
}

// ParamsKey is the canonical text of a spec's parameters.
func ParamsKey(spec *measurev1.TestSpec) string {
	var b []byte
	switch p := spec.GetParams().(type) {
	case *measurev1.TestSpec_Ping:
		b, _ = prototext.MarshalOptions{}.Marshal(p.Ping)
	case *measurev1.TestSpec_Qperf:
		b, _ = prototext.MarshalOptions{}.Marshal(p.Qperf)
	case *measurev1.TestSpec_Iperf3:
		b, _ = prototext.MarshalOptions{}.Marshal(p.Iperf3)
	case *measurev1.TestSpec_Http:
		b, _ = prototext.MarshalOptions{}.Marshal(p.Http)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// Label is the short form of the parameters a sweep varies: "64B" for a
// qperf message size, "P4" or "P4 128KiB" for iperf3 streams and block
// size; "" otherwise.
func Label(spec *measurev1.TestSpec) string {
	switch p := spec.GetParams().(type) {
	case *measurev1.TestSpec_Qperf:
		if sizes := p.Qperf.GetMsgSizeBytes(); len(sizes) == 1 {
			return FormatBytes(sizes[0])
		}
	case *measurev1.TestSpec_Iperf3:
		l := fmt.Sprintf("P%d", max(p.Iperf3.GetParallelStreams(), 1))
		if b := p.Iperf3.GetBlockSizeBytes(); b > 0 {
			l += " " + FormatBytes(b)
		}
		return l
	}
	return ""
}

// FormatBytes formats a size with a binary prefix, as a cell's Label
// shows it: "64B", "4KiB", "1500B".
func FormatBytes(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// Title is the name of a test with its label: "qperf_tcp_lat 64B".
func (c *Cell) Title() string {
	if c.Label == "" {
		return testspec.Name(c.Test)
	}
	return testspec.Name(c.Test) + " " + c.Label
}

// FailedCount is the number of results that are not samples.
func (c *Cell) FailedCount() int {
	n := 0
	for _, k := range c.Failed {
		n += k
	}
	return n
}

// Grouped is cells gathered by a key of theirs (Group): ByKey holds each
// key's group, Order the keys in the order of their first cell.
type Grouped[K comparable, G any] struct {
	// ByKey maps a key to its group.
	ByKey map[K]G
	// Order is the keys, the key of the first cell first.
	Order []K
}

// Group gathers cells by key(c), keeping the order in which each key
// first appears: open makes the group of a key's first cell, add then
// adds every cell, that first one included, to its group.
func Group[K comparable, G any](cells []*Cell, key func(*Cell) K, open func(*Cell) G, add func(G, *Cell)) Grouped[K, G] {
	g := Grouped[K, G]{ByKey: map[K]G{}}
	for _, c := range cells {
		k := key(c)
		grp, ok := g.ByKey[k]
		if !ok {
			grp = open(c)
			g.ByKey[k] = grp
			g.Order = append(g.Order, k)
		}
		add(grp, c)
	}
	return g
}

// Groups returns the groups in Order.
func (g Grouped[K, G]) Groups() []G {
	out := make([]G, 0, len(g.Order))
	for _, k := range g.Order {
		out = append(out, g.ByKey[k])
	}
	return out
}
