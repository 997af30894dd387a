package fleet

import (
	"errors"
	"fmt"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// This file holds what a simulated agent keeps of its plan: the version,
// the settings and the peers, taken from full plans and deltas.

// errBadPlan is a plan the simulated agent refuses (a delta on another
// version than it holds).
var errBadPlan = errors.New("plan refused")

// heldPlan is what a simulated agent holds of its plan: the peers as a
// bitset of fleet indexes (names outside the fleet are counted apart).
type heldPlan struct {
	version  uint64
	settings *agentv1.ProbeSettings
	peers    *bitset
}

// apply takes a full plan or a delta on the held version.
func (h *heldPlan) apply(p *agentv1.ProbePlan) error {
	if p.GetBaseVersion() != 0 && p.GetBaseVersion() != h.version {
		return fmt.Errorf("%w: delta on version %d, holding %d", errBadPlan, p.GetBaseVersion(), h.version)
	}
	if p.GetBaseVersion() == 0 {
		h.peers.reset()
		h.settings = p.GetSettings()
	} else if p.GetSettings() != nil {
		h.settings = p.GetSettings()
	}
	for _, n := range p.GetRemove() {
		if i := nodeIndex(n); i >= 0 && i < h.peers.n {
			h.peers.clear(i)
		}
	}
	for _, peer := range p.GetUpsert() {
		if i := nodeIndex(peer.GetNodeName()); i >= 0 && i < h.peers.n {
			h.peers.set(i)
		}
	}
	h.version = p.GetVersion()
	return nil
}

// bitset is a set of fleet indexes with its count.
type bitset struct {
	w     []uint64
	n     int
	count int
}

func newBitset(n int) *bitset    { return &bitset{w: make([]uint64, (n+63)/64), n: n} }
func (b *bitset) has(i int) bool { return b.w[i/64]&(1<<(i%64)) != 0 }
func (b *bitset) set(i int) {
	if !b.has(i) {
		b.w[i/64] |= 1 << (i % 64)
		b.count++
	}
}
func (b *bitset) clear(i int) {
	if b.has(i) {
		b.w[i/64] &^= 1 << (i % 64)
		b.count--
	}
}
func (b *bitset) reset() { clear(b.w); b.count = 0 }
