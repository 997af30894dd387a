package schedule

import (
	"fmt"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Planned is what PlanRun makes of a RunSpec.
type Planned struct {
	// Tests are the planned tests (Plan's).
	Tests []*measurev1.PlannedTest
	// Mesh is which rounds of the full mesh the tests measure; the zero
	// MeshWindow for a run of named pairs or of external targets alone.
	Mesh MeshWindow
}

// MeshWindow is which rounds of the full mesh a run measures
// (RunSpec.mesh_rounds): the rounds of the circle method over the mesh's
// nodes, in each of which every node is in one pair (Rounds).
type MeshWindow struct {
	// Nodes are the mesh's nodes, sorted: the circle the rounds are drawn
	// over (Arrange's circle).
	Nodes []string
	// First is the first round measured, 0-based.
	First int
	// Rounds is how many rounds are measured, from First on (modulo
	// Count).
	Rounds int
	// Count is how many rounds the full mesh has: 2(n-1) for n nodes, 2n
	// for odd n.
	Count int
}

// meshPairs returns the ordered pairs of mesh (sorted node names) that
// spec asks for, with the window they make up: every pair in nested order
// (source, then destination) for a spec without mesh_rounds, or with at
// least as many as the mesh has when all of them fit budget; else the
// pairs of rounds first_mesh_round..+mesh_rounds (modulo the mesh's
// rounds, at most all of them), round by round. cost(src, dst) is how
// many tests a pair plans: rounds are taken while their tests stay
// within budget, at least one. A spec without mesh_rounds whose full mesh
// is more than budget tests is refused (ErrInvalid) before any pair is
// built: the full mesh of 5,000 nodes is 25 million pairs.
func meshPairs(spec *measurev1.RunSpec, mesh []string, cost func(src, dst string) int, budget int) ([]*measurev1.NodePair, MeshWindow, error) {
	n := len(mesh)
	c := newCircle(n)
	w := MeshWindow{Nodes: mesh, Count: c.count()}
	if n < 2 {
		return nil, MeshWindow{}, nil
	}
	k := int(spec.GetMeshRounds())
	full := func() bool { // the full mesh's cost, at least a test a pair, fits
		if n*(n-1) > budget {
			return false
		}
		tests := 0
		for i, src := range mesh {
			for j, dst := range mesh {
				if i != j {
					if tests += cost(src, dst); tests > budget {
						return false
					}
				}
			}
		}
		return true
	}
	if k == 0 || k >= w.Count && full() {
		if n*(n-1) > budget {
			return nil, MeshWindow{}, fmt.Errorf("%w: the full mesh of %d nodes is %d pairs, more than %d tests; measure a few of its %d rounds at a time (mesh_rounds: trigger --mesh-rounds, a schedule's mesh_rounds), name pairs (trigger --pair), or watch a fleet this size with the continuous probes (the config's probes)",
				ErrInvalid, n, n*(n-1), budget, w.Count)
		}
		out := make([]*measurev1.NodePair, 0, n*(n-1))
		for _, src := range mesh {
			for _, dst := range mesh {
				if src != dst {
					out = append(out, &measurev1.NodePair{SrcNode: src, DstNode: dst})
				}
			}
		}
		w.Rounds = w.Count
		return out, w, nil
	}
	// Rounds of the mesh: all of them at most, as many as fit the budget.
	k = min(k, w.Count)
	w.First = int(spec.GetFirstMeshRound() % uint32(w.Count))
	var out []*measurev1.NodePair
	used := 0
	for i := range k {
		round := c.round((w.First + i) % w.Count)
		tests := 0
		for _, p := range round {
			tests += cost(mesh[p.src], mesh[p.dst])
		}
		if i > 0 && used+tests > budget {
			break
		}
		used += tests
		for _, p := range round {
			out = append(out, &measurev1.NodePair{SrcNode: mesh[p.src], DstNode: mesh[p.dst]})
		}
		w.Rounds++
	}
	return out, w, nil
}
