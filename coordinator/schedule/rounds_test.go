package schedule

import (
	"fmt"
	"testing"
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
