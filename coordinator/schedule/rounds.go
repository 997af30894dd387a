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
// kept; fewer than two nodes give no rounds. Round r is circle.round(r):
// a sample of the mesh's rounds needs no others.
func Rounds(nodes []string) [][]Pair {
	c := newCircle(len(nodes))
	if c.count() == 0 {
		return nil
	}
	rounds := make([][]Pair, c.count())
	for r := range rounds {
		for _, p := range c.round(r) {
			rounds[r] = append(rounds[r], Pair{Src: nodes[p.src], Dst: nodes[p.dst]})
		}
	}
	return rounds
}

// OptimalRounds is the fewest rounds a full mesh of n nodes needs in both
// directions when no node may be in two pairs of a round: 2(n-1) for even
// n, 2n for odd n.
func OptimalRounds(n int) int { return newCircle(n).count() }

// circle is the circle method's layout of n nodes (indices 0..n-1 in the
// nodes' order) in m slots: n, or n+1 with an empty slot (a bye) for odd
// n. Slot 0 keeps node 0; in forward round f the others have turned f
// steps, so slot s (1..m-1) holds node ((s-1-f) mod (m-1)) + 1, and slots
// s and m-1-s play each other. Rounds m-1 .. 2(m-1)-1 play the forward
// rounds again with client and server swapped. Every round is computed on
// its own, in O(n), and every pair's round in O(1) (roundOf), so a sample
// of rounds of 5,000 nodes costs what it holds, not the 25 million pairs
// of the mesh.
type circle struct{ n, m int }

// newCircle lays out n nodes.
func newCircle(n int) circle { return circle{n: n, m: n + n%2} }

// count is how many rounds the full mesh takes in both directions: 0 for
// fewer than two nodes.
func (c circle) count() int {
	if c.n < 2 {
		return 0
	}
	return 2 * (c.m - 1)
}

// indexPair is an ordered pair of node indices.
type indexPair struct{ src, dst int }

// at is the node in slot s of forward round f (c.n for the bye).
func (c circle) at(s, f int) int {
	if s == 0 {
		return 0
	}
	k := c.m - 1
	return ((s-1-f)%k+k)%k + 1
}

// slotOf is node v's slot in forward round f.
func (c circle) slotOf(v, f int) int {
	if v == 0 {
		return 0
	}
	k := c.m - 1
	return (v-1+f)%k + 1
}

// oriented is the pair of slots s and m-1-s (s < m/2) in forward round f,
// client first: the client alternates with the round and the slot, so that
// each direction's rounds are balanced.
func (c circle) oriented(s, f int) indexPair {
	a, b := c.at(s, f), c.at(c.m-1-s, f)
	if (f+s)%2 == 1 {
		a, b = b, a
	}
	return indexPair{a, b}
}

// round returns round r's pairs (0 <= r < count), in slot order; a pair
// with the bye is left out.
func (c circle) round(r int) []indexPair {
	k := c.m - 1
	f, back := r%k, r >= k
	out := make([]indexPair, 0, c.m/2)
	for s := range c.m / 2 {
		p := c.oriented(s, f)
		if p.src >= c.n || p.dst >= c.n {
			continue
		}
		if back {
			p.src, p.dst = p.dst, p.src
		}
		out = append(out, p)
	}
	return out
}

// roundOf returns the round in which the ordered pair of distinct node
// indices p plays (0 <= round < count) and its slot there (the order of
// pairs within a round).
func (c circle) roundOf(p indexPair) (round, slot int) {
	k := c.m - 1
	a, b := p.src, p.dst
	var f int
	switch {
	case a == 0 || b == 0:
		// Node 0 plays slot m-1's node: v sits there in round k-v.
		f = (k - max(a, b)) % k
	default:
		// Slots of a and b add up to m-1: (a-1+f) + (b-1+f) = k-2 (mod
		// k), so 2f = k-a-b (mod k); k is odd, so 2 has the inverse
		// (k+1)/2.
		f = (((k-a-b)%k + k) % k) * ((k + 1) / 2) % k
	}
	slot = min(c.slotOf(a, f), c.slotOf(b, f))
	if c.oriented(slot, f).src == a {
		return f, slot
	}
	return f + k, slot
}
