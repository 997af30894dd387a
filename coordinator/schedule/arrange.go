package schedule

import (
	"slices"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Slot is one node pair's share of a round: its heavy tests, run one after
// the other while no other test loads either node.
type Slot struct {
	// Pair is the ordered node pair.
	Pair Pair
	// Tests are the pair's heavy tests, in plan order.
	Tests []*measurev1.PlannedTest
}

// Arrangement is how a run's tests are laid out in time.
type Arrangement struct {
	// Light are the tests that neither need a server nor load the link
	// (ping, HTTP): they run first, bounded per node, while no heavy test
	// loads the network they measure.
	Light []*measurev1.PlannedTest
	// Rounds hold the heavy tests (qperf, iperf3): within a round every
	// node is in at most one slot, as client or server; a round ends when
	// its last slot does. Rounds without heavy tests are left out.
	Rounds [][]Slot
}

// Arrange lays planned tests out: light ones apart, heavy ones in the
// rounds of a round-robin tournament over the run's nodes (Rounds), so a
// full mesh needs the fewest rounds possible and no two heavy tests ever
// share a node. Plan order is kept within a slot and among light tests.
// A test on an external path is light (Plan gives them ping and HTTP
// only), and its destination, a target's name, is no node of the rounds.
func Arrange(planned []*measurev1.PlannedTest) Arrangement {
	var a Arrangement
	byPair := map[Pair][]*measurev1.PlannedTest{}
	var nodes []string
	for _, pt := range planned {
		ends := []string{pt.GetSrcNode(), pt.GetDstNode()}
		if testspec.IsExternal(pt.GetPath()) {
			ends = ends[:1] // the destination is a target's name, not a node
		}
		for _, n := range ends {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		if !testspec.IsHeavy(pt.GetSpec().GetTest()) {
			a.Light = append(a.Light, pt)
			continue
		}
		p := Pair{Src: pt.GetSrcNode(), Dst: pt.GetDstNode()}
		byPair[p] = append(byPair[p], pt)
	}
	slices.Sort(nodes)
	for _, round := range Rounds(nodes) {
		var slots []Slot
		for _, p := range round {
			if tests := byPair[p]; len(tests) > 0 {
				slots = append(slots, Slot{Pair: p, Tests: tests})
			}
		}
		if len(slots) > 0 {
			a.Rounds = append(a.Rounds, slots)
		}
	}
	return a
}
