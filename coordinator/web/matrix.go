package web

// This file holds the matrix of a run's mesh: its cells' states against
// their references (runData.cell), the nodes shown, and the grid they
// are laid out in.

import (
	"cmp"
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// fillMesh fills v's matrix from d's cells of test and path, a path to
// a node (runMesh offers no other).
func fillMesh(v *meshView, d *runData, test measurev1.Test, path measurev1.Path) {
	run := d.run
	v.RunID, v.Label = run.GetRunId(), run.GetSpec().GetLabel()
	if t := run.GetEndTime(); t != nil {
		v.EndTime = t.AsTime().UTC().Format("2006-01-02T15:04:05Z")
	}
	v.Findings = d.findings
	params := d.params[test]
	base := testcell.Baseline(path)
	nodeSet := map[string]bool{}
	var values []float64
	for k, c := range d.cells {
		if k.Test != test || k.Params != params || (k.Path != path && k.Path != base) {
			continue
		}
		nodeSet[k.Src], nodeSet[k.Dst] = true, true
		v.Params = c.Label
		if k.Path == path && len(c.Samples) > 0 {
			values = append(values, c.Stats.Median)
		}
	}
	median := stats.FiniteMedian(values)
	v.Median = fig(median)
	hib := testcell.HigherIsBetter(test)
	v4 := measurev1.IPFamily_IP_FAMILY_IPV4 // the mesh shows IPv4
	at := func(src, dst string) meshCell {
		return d.cell(testcell.CellKey{Src: src, Dst: dst, Path: path, Test: test, Params: params, Family: v4}, base, median, hib)
	}
	pairs := func(yield func(src, dst string) bool) {
		for k := range d.cells {
			if k.Test == test && k.Params == params && k.Path == path && k.Family == v4 && !yield(k.Src, k.Dst) {
				return
			}
		}
	}
	fillGrid(v, slices.Sorted(maps.Keys(nodeSet)), pairs, at)
}

// fillGrid lays out the matrix of nodes (sorted) in v, each pair's cell
// from cellAt (stateNone: the pair has none). Past MaxMeshNodes nodes (a
// probe period, or a run of mesh rounds, over thousands of nodes) it
// shows the worstNodes, their bad cells counted over pairs, the pairs
// that have cells (not over the n x n matrix).
func fillGrid(v *meshView, nodes []string, pairs iter.Seq2[string, string], cellAt func(src, dst string) meshCell) {
	v.TotalNodes = len(nodes)
	if len(nodes) > MaxMeshNodes {
		bad := make(map[string]int, len(nodes))
		for src, dst := range pairs {
			if st := cellAt(src, dst).state; st != stateOK && st != stateNone {
				bad[src]++
				bad[dst]++
			}
		}
		nodes = worstNodes(nodes, bad)
	}
	n := len(nodes)
	g := newGrid(n)
	for i, src := range nodes {
		for j, dst := range nodes {
			if i == j {
				continue
			}
			c, at := cellAt(src, dst), i*n+j
			if c.hasBase {
				g.base[at] = fig(c.ref)
			}
			if c.hasLoss {
				g.loss[at] = fig(c.loss)
			}
			g.state[at] = c.state
			if c.state == stateNone {
				continue
			}
			if c.state != stateFail {
				g.value[at] = fig(c.value)
			}
			g.settle(i, j)
		}
	}
	arrange(v, nodes, g)
}

// meshCell is one cell of a matrix: its state, its figure (none for
// stateNone and stateFail), its reference (the pair's baseline figure,
// when it has one) and loss.
type meshCell struct {
	state            byte
	value, ref, loss float64
	hasBase, hasLoss bool
}

// cell is cell k of d against its reference: median, the mesh's, on the
// baseline path base; off it, the pair's cell on base (none: no
// reference). A missing cell is stateNone, one without samples
// stateFail, one with failures, loss or a figure worse than its
// reference stateDegraded.
func (d *runData) cell(k testcell.CellKey, base measurev1.Path, median float64, higherIsBetter bool) meshCell {
	var rc meshCell
	rc.ref = median
	if k.Path != base {
		rc.ref = math.NaN()
		bk := k
		bk.Path = base
		if bc := d.cells[bk]; bc != nil && len(bc.Samples) > 0 {
			rc.ref, rc.hasBase = bc.Stats.Median, true
		}
	}
	rc.loss, rc.hasLoss = d.loss[k]
	c := d.cells[k]
	switch {
	case c == nil:
		rc.state = stateNone
	case len(c.Samples) == 0:
		rc.state = stateFail
	default:
		rc.value, rc.state = c.Stats.Median, stateOK
		if c.FailedCount() > 0 || (rc.hasLoss && rc.loss > 0) || worse(c.Stats.Median, rc.ref, higherIsBetter) {
			rc.state = stateDegraded
		}
	}
	return rc
}

// grid is a matrix over n nodes being filled, n*n row-major: each cell's
// state and figures (value, base reference, loss), and each node's count
// of cells not OK.
type grid struct {
	n                 int
	state             []byte
	value, base, loss []fig
	bad               []int
}

// newGrid is an n x n grid with no figures, its diagonal stateSelf.
func newGrid(n int) *grid {
	g := &grid{n: n, state: make([]byte, n*n), value: make([]fig, n*n), base: make([]fig, n*n), loss: make([]fig, n*n), bad: make([]int, n)}
	for at := range g.state {
		g.value[at], g.base[at], g.loss[at] = none, none, none
	}
	for i := range n {
		g.state[i*n+i] = stateSelf
	}
	return g
}

// settle counts the filled cell (i, j) against both its nodes unless it
// is OK.
func (g *grid) settle(i, j int) {
	if g.state[i*g.n+j] != stateOK {
		g.bad[i]++
		g.bad[j]++
	}
}

// arrange puts a grid over nodes (sorted by name) into v in display order: nodes with most bad cells first, so that a bad
// node's row and column group at the top left as a cross; then by name.
func arrange(v *meshView, nodes []string, g *grid) {
	n := len(nodes)
	state, value, baseV, loss, bad := g.state, g.value, g.base, g.loss, g.bad
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(bad[b], bad[a]) })
	v.Nodes = make([]string, n)
	sb := make([]byte, n*n)
	v.Value, v.Base, v.Loss = make(figs, n*n), make(figs, n*n), make(figs, n*n)
	for i, oi := range order {
		v.Nodes[i] = nodes[oi]
		for j, oj := range order {
			from, to := oi*n+oj, i*n+j
			sb[to], v.Value[to], v.Base[to], v.Loss[to] = state[from], value[from], baseV[from], loss[from]
		}
	}
	v.State = string(sb)
}

// worse reports whether v is worse than ref by more than DegradedRatio
// and, for a latency, by more than DegradedFloorSeconds.
func worse(v, ref float64, higherIsBetter bool) bool {
	if math.IsNaN(ref) || ref <= 0 {
		return false
	}
	if higherIsBetter {
		return v < ref/DegradedRatio
	}
	return v > ref*DegradedRatio && v-ref > DegradedFloorSeconds
}
