package schedule

import (
	"cmp"
	"maps"
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
	// loads the network they measure. They are in waves: repeat by
	// repeat, the node pairs in the order of Rounds (a node in one pair
	// per wave), each source's external targets one per wave, so that
	// tests taken in this order spread over every node at once rather
	// than queueing on the first source's.
	Light []*measurev1.PlannedTest
	// Rounds hold the heavy tests (qperf, iperf3): within a round every
	// node is in at most one slot, as client or server; a round ends when
	// its last slot does. Rounds without heavy tests are left out.
	Rounds [][]Slot
	// External hold the heavy tests to external targets (iperf3 and qperf
	// to a server behind a target), one queue per target in plan order:
	// they run after the rounds, a queue's tests one after the other (one
	// client at a time per external server), the queues side by side.
	External []ExternalQueue
}

// ExternalQueue is one external target's heavy tests, to run one at a
// time: its server takes a single client (iperf3 answers a second one
// "the server is busy running a test").
type ExternalQueue struct {
	// Target is the target's name (the tests' dst_node).
	Target string
	// Tests are its heavy tests, in plan order (repeat, source, path,
	// test).
	Tests []*measurev1.PlannedTest
}

// Arrange lays planned tests out: light ones apart, in waves (see
// Arrangement.Light), heavy ones in the rounds of a round-robin tournament
// (Rounds) over circle and the tests' nodes (sorted), so a full mesh needs
// the fewest rounds possible, a run of mesh rounds (Planned.Mesh, whose
// Nodes are the circle) the rounds it measures, and no two heavy tests
// ever share a node. Each pair's round is computed, not searched for:
// O(tests), whatever the number of nodes. Plan order is kept within a
// slot and among the light tests of one wave (a pair's paths and tests).
// The destination of a test on an external path, a target's name, is no
// node of the rounds: a light one (ping, HTTP) is among Light, a heavy one
// (iperf3, qperf to a server behind the target) in its target's queue in
// External.
func Arrange(planned []*measurev1.PlannedTest, circle []string) Arrangement {
	var a Arrangement
	queues := map[string]int{} // target -> index in a.External
	byPair := map[Pair][]*measurev1.PlannedTest{}
	var heavy []Pair // byPair's keys in plan order
	index := map[string]int{}
	for _, n := range circle {
		index[n] = 0
	}
	for _, pt := range planned {
		d, test := testspec.DestOf(pt), pt.GetSpec().GetTest()
		for _, n := range d.Nodes(pt.GetSrcNode()) {
			index[n] = 0
		}
		p := Pair{Src: pt.GetSrcNode(), Dst: d.Name()}
		switch {
		case d.Queued(test):
			q, ok := queues[d.Name()]
			if !ok {
				q = len(a.External)
				queues[d.Name()] = q
				a.External = append(a.External, ExternalQueue{Target: d.Name()})
			}
			a.External[q].Tests = append(a.External[q].Tests, pt)
		case !testspec.IsHeavy(test):
			a.Light = append(a.Light, pt)
		default:
			if _, ok := byPair[p]; !ok {
				heavy = append(heavy, p)
			}
			byPair[p] = append(byPair[p], pt)
		}
	}
	nodes := slices.Sorted(maps.Keys(index))
	for i, n := range nodes {
		index[n] = i
	}
	c := newCircle(len(nodes))
	at := func(p Pair) (round, slot int) { return c.roundOf(indexPair{index[p.Src], index[p.Dst]}) }
	type placed struct {
		round, slot int
		pair        Pair
	}
	slots := make([]placed, len(heavy))
	for i, p := range heavy {
		r, s := at(p)
		slots[i] = placed{r, s, p}
	}
	slices.SortFunc(slots, func(x, y placed) int { return cmp.Or(cmp.Compare(x.round, y.round), cmp.Compare(x.slot, y.slot)) })
	for i, s := range slots {
		if i == 0 || s.round != slots[i-1].round {
			a.Rounds = append(a.Rounds, nil)
		}
		a.Rounds[len(a.Rounds)-1] = append(a.Rounds[len(a.Rounds)-1], Slot{Pair: s.pair, Tests: byPair[s.pair]})
	}
	a.Light = inWaves(a.Light, at)
	return a
}

// inWaves orders light tests by repeat, then wave: a node pair's wave is
// its round (at), the n-th external target of a source in a repeat is in
// wave n. Plan order is kept within a wave.
func inWaves(light []*measurev1.PlannedTest, at func(Pair) (round, slot int)) []*measurev1.PlannedTest {
	type srcRepeat struct {
		src    string
		repeat uint32
	}
	type waved struct {
		pt     *measurev1.PlannedTest
		repeat uint32
		wave   int
	}
	nodeWave := func(pt *measurev1.PlannedTest) int {
		round, _ := at(Pair{Src: pt.GetSrcNode(), Dst: pt.GetDstNode()})
		return round
	}
	targets := map[srcRepeat]map[string]int{} // a source's external targets per repeat, in plan order
	targetWave := func(pt *measurev1.PlannedTest) int {
		sr := srcRepeat{pt.GetSrcNode(), pt.GetRepeat()}
		seen := targets[sr]
		if seen == nil {
			seen = map[string]int{}
			targets[sr] = seen
		}
		n, ok := seen[pt.GetDstNode()]
		if !ok {
			n = len(seen)
			seen[pt.GetDstNode()] = n
		}
		return n
	}
	tests := make([]waved, len(light))
	for i, pt := range light {
		wave := testspec.Pick(testspec.DestOf(pt), nodeWave, targetWave)
		tests[i] = waved{pt: pt, repeat: pt.GetRepeat(), wave: wave(pt)}
	}
	slices.SortStableFunc(tests, func(x, y waved) int {
		if c := cmp.Compare(x.repeat, y.repeat); c != 0 {
			return c
		}
		return cmp.Compare(x.wave, y.wave)
	})
	out := make([]*measurev1.PlannedTest, len(tests))
	for i, w := range tests {
		out[i] = w.pt
	}
	return out
}
