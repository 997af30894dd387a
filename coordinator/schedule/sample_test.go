package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// named returns n node names, sorted (node-0001 ...).
func named(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%04d", i)
	}
	return out
}

// bandwidth is the shipped bandwidth schedule's kind of spec: two heavy
// tests on two paths, 4 tests a pair.
func bandwidth(rounds, first uint32) *measurev1.RunSpec {
	return &measurev1.RunSpec{
		Tests:      []*measurev1.TestSpec{{Test: measurev1.Test_TEST_IPERF3_TCP}, {Test: measurev1.Test_TEST_QPERF_TCP_BW}},
		Paths:      []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD},
		MeshRounds: rounds, FirstMeshRound: first,
	}
}

// TestPlanMeshRounds plans runs of a few rounds of the mesh: each round
// puts every node (but one, for odd n) in one pair, the heavy tests take
// as many rounds as the run measures, and the window says which.
func TestPlanMeshRounds(t *testing.T) {
	tests := []struct {
		name                string
		nodes               int
		rounds, first       uint32
		wantPairs           int
		wantFirst, wantTake int
		wantCount           int
	}{
		{"two rounds of six", 6, 2, 0, 6, 0, 2, 10},
		{"one round of seven", 7, 1, 3, 3, 3, 1, 14},
		{"first wraps", 6, 3, 12, 9, 2, 3, 10},
		{"as many as the mesh: full", 5, 10, 0, 20, 0, 10, 10},
		{"more than the mesh: full", 4, 99, 5, 12, 0, 6, 6},
		{"none: full", 4, 0, 0, 12, 0, 6, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := named(tt.nodes)
			p, err := PlanRun(bandwidth(tt.rounds, tt.first), all(nodes))
			if err != nil {
				t.Fatal(err)
			}
			w := p.Mesh
			if w.First != tt.wantFirst || w.Rounds != tt.wantTake || w.Count != tt.wantCount || len(w.Nodes) != tt.nodes {
				t.Errorf("window first %d rounds %d of %d over %d nodes, want %d, %d of %d over %d",
					w.First, w.Rounds, w.Count, len(w.Nodes), tt.wantFirst, tt.wantTake, tt.wantCount, tt.nodes)
			}
			pairs := map[Pair]int{}
			perNode := map[string]int{}
			for _, pt := range p.Tests {
				pr := Pair{pt.GetSrcNode(), pt.GetDstNode()}
				if pairs[pr]++; pairs[pr] == 1 {
					perNode[pr.Src]++
					perNode[pr.Dst]++
				}
			}
			if len(pairs) != tt.wantPairs || len(p.Tests) != 4*tt.wantPairs {
				t.Errorf("%d pairs, %d tests; want %d pairs of 4 tests", len(pairs), len(p.Tests), tt.wantPairs)
			}
			for n, c := range perNode {
				if c > w.Rounds {
					t.Errorf("%s is in %d pairs, more than the %d rounds", n, c, w.Rounds)
				}
			}
			a := Arrange(p.Tests, w.Nodes)
			if len(a.Rounds) != w.Rounds {
				t.Errorf("the heavy tests take %d rounds, want the window's %d", len(a.Rounds), w.Rounds)
			}
		})
	}
}

// TestMeshRoundsCoverTheMesh: runs that each start where the last ended
// measure every ordered pair exactly once per turn of the mesh.
func TestMeshRoundsCoverTheMesh(t *testing.T) {
	for _, n := range []int{2, 3, 8, 9} {
		for _, k := range []uint32{1, 3, 4} {
			nodes := named(n)
			seen := map[Pair]int{}
			first, count := uint32(0), 0
			for turn := 0; turn == 0 || int(first) != 0 || turn < 1; turn++ {
				p, err := PlanRun(bandwidth(k, first), all(nodes))
				if err != nil {
					t.Fatal(err)
				}
				for _, pt := range p.Tests {
					if pt.GetSpec().GetTest() == measurev1.Test_TEST_IPERF3_TCP && pt.GetPath() == measurev1.Path_PATH_HOST_TO_HOST {
						seen[Pair{pt.GetSrcNode(), pt.GetDstNode()}]++
					}
				}
				count = p.Mesh.Count
				first = uint32((p.Mesh.First + p.Mesh.Rounds) % count)
				if turn > count {
					t.Fatalf("n=%d k=%d: no turn of the mesh after %d runs", n, k, turn)
				}
			}
			if len(seen) != n*(n-1) {
				t.Errorf("n=%d k=%d: a turn measured %d pairs, want %d", n, k, len(seen), n*(n-1))
			}
			for p, c := range seen {
				if c != 1 && count%int(k) == 0 {
					t.Errorf("n=%d k=%d: %v measured %d times in a turn", n, k, p, c)
				}
			}
		}
	}
}

// TestPlanMeshRoundsAtScale: at 5,000 nodes a round is 2,500 pairs, 10,000
// tests of the bandwidth spec, so 20 rounds asked are cut to the 10 that
// fit MaxPlannedTests; the full mesh is refused with what to do instead.
func TestPlanMeshRoundsAtScale(t *testing.T) {
	nodes := named(5000)
	p, err := PlanRun(bandwidth(20, 7), all(nodes))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mesh.Rounds != 10 || p.Mesh.First != 7 || p.Mesh.Count != 9998 || len(p.Tests) != MaxPlannedTests {
		t.Errorf("rounds %d from %d of %d, %d tests; want 10 from 7 of 9998, %d tests", p.Mesh.Rounds, p.Mesh.First, p.Mesh.Count, len(p.Tests), MaxPlannedTests)
	}
	if a := Arrange(p.Tests, p.Mesh.Nodes); len(a.Rounds) != 10 {
		t.Errorf("the heavy tests take %d rounds, want 10", len(a.Rounds))
	}
	_, err = PlanRun(bandwidth(0, 0), all(nodes))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "mesh_rounds") {
		t.Errorf("full mesh of 5,000 nodes: %v, want ErrInvalid naming mesh_rounds", err)
	}
	// 170 nodes: 338 rounds, whose 114,920 tests do not fit; asked for
	// all of them (or more), a run takes the 294 rounds of 85 pairs that
	// fit (99,960 tests).
	for _, k := range []uint32{338, 1000} {
		p, err := PlanRun(bandwidth(k, 0), all(named(170)))
		if err != nil || p.Mesh.Rounds != 294 || p.Mesh.Count != 338 || len(p.Tests) != 99_960 {
			t.Errorf("mesh_rounds %d of 170 nodes: %d rounds of %d, %d tests, %v; want 294 of 338, 99,960 tests", k, p.Mesh.Rounds, p.Mesh.Count, len(p.Tests), err)
		}
	}
	spec := bandwidth(4, 0)
	spec.Pairs = []*measurev1.NodePair{{SrcNode: nodes[0], DstNode: nodes[1]}}
	if _, err := PlanRun(spec, all(nodes)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "mesh_rounds 4") {
		t.Errorf("mesh_rounds with pairs: %v, want ErrInvalid naming mesh_rounds 4", err)
	}
}

// BenchmarkPlanMeshRounds5000 plans and arranges 10 rounds of a 5,000-node
// mesh (100,000 tests): what a continuous bandwidth run of a large fleet
// costs the coordinator to start.
func BenchmarkPlanMeshRounds5000(b *testing.B) {
	nodes := all(named(5000))
	for b.Loop() {
		p, err := PlanRun(bandwidth(10, 0), nodes)
		if err != nil {
			b.Fatal(err)
		}
		Arrange(p.Tests, p.Mesh.Nodes)
	}
}
