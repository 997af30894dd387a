package schedule

import (
	"fmt"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestRoundsProperties checks, for n = 2..64: every ordered pair of
// distinct nodes appears exactly once, no node is in two pairs of a round,
// and the number of rounds is the optimum.
func TestRoundsProperties(t *testing.T) {
	for n := 2; n <= 64; n++ {
		nodes := make([]string, n)
		for i := range nodes {
			nodes[i] = fmt.Sprintf("node-%d", i+1)
		}
		rounds := Rounds(nodes)
		if got, want := len(rounds), OptimalRounds(n); got != want {
			t.Errorf("n=%d: %d rounds, want %d", n, got, want)
		}
		seen := map[Pair]int{}
		for r, round := range rounds {
			busy := map[string]bool{}
			for _, p := range round {
				if p.Src == p.Dst {
					t.Errorf("n=%d round %d: %s paired with itself", n, r, p.Src)
				}
				for _, node := range []string{p.Src, p.Dst} {
					if busy[node] {
						t.Errorf("n=%d round %d: %s is in two pairs", n, r, node)
					}
					busy[node] = true
				}
				seen[p]++
			}
			// Every round is full: all nodes busy, but one for odd n.
			if want := n - n%2; len(busy) != want {
				t.Errorf("n=%d round %d: %d nodes busy, want %d", n, r, len(busy), want)
			}
		}
		if len(seen) != n*(n-1) {
			t.Errorf("n=%d: %d distinct ordered pairs, want %d", n, len(seen), n*(n-1))
		}
		for p, c := range seen {
			if c != 1 {
				t.Errorf("n=%d: %v appears %d times", n, p, c)
			}
		}
	}
}

func TestRoundsSmall(t *testing.T) {
	if got := Rounds([]string{"a"}); got != nil {
		t.Errorf("one node: %v", got)
	}
	got := fmt.Sprint(Rounds([]string{"a", "b", "c"}))
	// Three nodes: three rounds of one pair per direction, a bye each round.
	if want := "[[{c b}] [{c a}] [{a b}] [{b c}] [{a c}] [{b a}]]"; got != want {
		t.Errorf("Rounds(a,b,c) = %s, want %s", got, want)
	}
}

func TestArrange(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	spec := &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{
		{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_IPERF3_TCP}, {Test: measurev1.Test_TEST_QPERF_TCP_LAT},
		{Test: measurev1.Test_TEST_HTTP_LOAD}, // heavy: in the rounds
	}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD}}
	planned, err := Plan(spec, all(nodes))
	if err != nil {
		t.Fatal(err)
	}
	a := Arrange(planned, nil)
	if got, want := len(a.Light), 12*2; got != want {
		t.Errorf("%d light tests, want %d", got, want)
	}
	if got, want := len(a.Rounds), OptimalRounds(4); got != want {
		t.Errorf("%d rounds, want %d", got, want)
	}
	heavy := 0
	for r, round := range a.Rounds {
		busy := map[string]bool{}
		for _, s := range round {
			for _, n := range []string{s.Pair.Src, s.Pair.Dst} {
				if busy[n] {
					t.Errorf("round %d: %s in two slots", r, n)
				}
				busy[n] = true
			}
			for _, pt := range s.Tests {
				if pt.GetSrcNode() != s.Pair.Src || pt.GetDstNode() != s.Pair.Dst {
					t.Errorf("round %d: test %s of %s->%s in slot %v", r, pt.GetTestId(), pt.GetSrcNode(), pt.GetDstNode(), s.Pair)
				}
			}
			// 3 heavy tests (iperf3, qperf, http_load) x 2 paths per
			// ordered pair.
			if len(s.Tests) != 6 {
				t.Errorf("round %d slot %v: %d tests, want 6", r, s.Pair, len(s.Tests))
			}
			heavy += len(s.Tests)
		}
	}
	if heavy+len(a.Light) != len(planned) {
		t.Errorf("arranged %d tests, planned %d", heavy+len(a.Light), len(planned))
	}
	// Only some pairs: rounds without any of them are left out.
	one, err := Plan(&measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_IPERF3_TCP}},
		Pairs: []*measurev1.NodePair{{SrcNode: "n1", DstNode: "n2"}}}, all(nodes))
	if err != nil {
		t.Fatal(err)
	}
	if got := Arrange(one, nil); len(got.Rounds) != 1 || len(got.Rounds[0]) != 1 {
		t.Errorf("one pair: rounds %v, want one round with one slot", got.Rounds)
	}
}

// Light tests come in waves: repeat by repeat, and within a repeat each
// run of one round's worth of tests involves every node at most once, so
// a dispatcher that takes them in order spreads over every node instead
// of queueing on the first source's. Each pair's tests stay together, in
// plan order.
func TestArrangeLightWaves(t *testing.T) {
	for _, n := range []int{2, 3, 8, 11} {
		nodes := make([]string, n)
		for i := range nodes {
			nodes[i] = fmt.Sprintf("node-%02d", i)
		}
		spec := &measurev1.RunSpec{Repeats: 2, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_HTTP}},
			Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}
		planned, err := Plan(spec, all(nodes))
		if err != nil {
			t.Fatal(err)
		}
		light := Arrange(planned, nil).Light
		if len(light) != len(planned) {
			t.Fatalf("n=%d: %d light tests, planned %d", n, len(light), len(planned))
		}
		perPair := 2 // ping and HTTP
		perWave := n / 2 * perPair
		var repeat uint32
		for i := 0; i < len(light); i += perPair {
			if light[i].GetRepeat() < repeat {
				t.Fatalf("n=%d: test %d (%s) of repeat %d after repeat %d", n, i, light[i].GetTestId(), light[i].GetRepeat(), repeat)
			}
			repeat = light[i].GetRepeat()
			a, b := light[i], light[i+1]
			if a.GetSrcNode() != b.GetSrcNode() || a.GetDstNode() != b.GetDstNode() || a.GetTestId() > b.GetTestId() {
				t.Errorf("n=%d: tests %s and %s of one pair are apart or out of plan order", n, a.GetTestId(), b.GetTestId())
			}
		}
		// The first wave: n/2 pairs, every node in one of them.
		seen := map[Pair]bool{}
		for _, pt := range light[:perWave] {
			seen[Pair{Src: pt.GetSrcNode(), Dst: pt.GetDstNode()}] = true
		}
		busy := map[string]int{}
		for p := range seen {
			busy[p.Src]++
			busy[p.Dst]++
		}
		for node, k := range busy {
			if k > 1 {
				t.Errorf("n=%d: node %s in %d pairs of the first wave %v", n, node, k, seen)
			}
		}
		if len(seen) != n/2 {
			t.Errorf("n=%d: first wave has %d pairs, want %d", n, len(seen), n/2)
		}
	}
}

// TestRoundOf checks that circle.roundOf finds every pair where Rounds
// puts it, at its place in the round, for n = 2..41.
func TestRoundOf(t *testing.T) {
	for n := 2; n <= 41; n++ {
		nodes := make([]string, n)
		index := map[string]int{}
		for i := range nodes {
			nodes[i] = fmt.Sprintf("n%02d", i)
			index[nodes[i]] = i
		}
		c := newCircle(n)
		rounds := Rounds(nodes)
		for r, round := range rounds {
			lastSlot := -1
			for _, p := range round {
				gotR, slot := c.roundOf(indexPair{index[p.Src], index[p.Dst]})
				if gotR != r {
					t.Fatalf("n=%d: roundOf(%v) = %d, Rounds has it in %d", n, p, gotR, r)
				}
				if slot <= lastSlot {
					t.Fatalf("n=%d round %d: %v in slot %d after slot %d", n, r, p, slot, lastSlot)
				}
				lastSlot = slot
			}
		}
	}
}
