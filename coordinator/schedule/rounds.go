package schedule

// Pair is an ordered node pair: the client runs on Src, the server on Dst.
type Pair struct {
	// Src is the client's node.
	Src string
	// Dst is the server's node.
	Dst string
}

// Rounds arranges every ordered pair of distinct nodes into rounds in which
// each node takes part in at most one pair, as client or server: a
// round-robin tournament by the circle method, played once per direction.
// One direction takes n-1 rounds for even n and n for odd n (one node sits
// out each round), the fewest possible; both take twice that. Node order is
// kept; fewer than two nodes give no rounds.
func Rounds(nodes []string) [][]Pair {
	n := len(nodes)
	if n < 2 {
		return nil
	}
	// The circle: slot 0 stays, the others rotate. An odd count gets an
	// empty slot (a bye).
	slots := make([]int, 0, n+1)
	for i := range nodes {
		slots = append(slots, i)
	}
	if n%2 == 1 {
		slots = append(slots, -1)
	}
	m := len(slots)
	forward := make([][]Pair, 0, m-1)
	for r := 0; r < m-1; r++ {
		var round []Pair
		for i := 0; i < m/2; i++ {
			a, b := slots[i], slots[m-1-i]
			if a < 0 || b < 0 {
				continue
			}
			// Alternate who serves so that each direction pass is balanced.
			if (r+i)%2 == 1 {
				a, b = b, a
			}
			round = append(round, Pair{Src: nodes[a], Dst: nodes[b]})
		}
		forward = append(forward, round)
		// Rotate every slot but the first one step.
		last := slots[m-1]
		copy(slots[2:], slots[1:m-1])
		slots[1] = last
	}
	rounds := forward
	for _, round := range forward {
		back := make([]Pair, len(round))
		for i, p := range round {
			back[i] = Pair{Src: p.Dst, Dst: p.Src}
		}
		rounds = append(rounds, back)
	}
	return rounds
}

// OptimalRounds is the fewest rounds a full mesh of n nodes needs in both
// directions when no node may be in two pairs of a round: 2(n-1) for even
// n, 2n for odd n.
func OptimalRounds(n int) int {
	switch {
	case n < 2:
		return 0
	case n%2 == 0:
		return 2 * (n - 1)
	}
	return 2 * n
}
