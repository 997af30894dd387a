package probeplan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// replica is what an agent holds: the version and its plan.
type replica struct {
	version  uint64
	peers    map[string]*agentv1.ProbePeer
	settings *agentv1.ProbeSettings
}

// Apply applies plan to held as a strict agent does: a full plan replaces
// it; a delta must be based on exactly held's version, grow it, and only
// treat a removal of a peer it does not hold as a no-op (Table.Delta may
// send one for a name that flapped).
func Apply(held *replica, plan *agentv1.ProbePlan) error {
	if plan.GetBaseVersion() == 0 {
		held.peers = map[string]*agentv1.ProbePeer{}
		for _, p := range plan.GetUpsert() {
			held.peers[p.GetNodeName()] = p
		}
		held.settings, held.version = plan.GetSettings(), plan.GetVersion()
		if len(plan.GetRemove()) != 0 {
			return errors.New("full plan with removals")
		}
		return nil
	}
	if plan.GetBaseVersion() != held.version {
		return fmt.Errorf("delta based on %d, held %d", plan.GetBaseVersion(), held.version)
	}
	if plan.GetVersion() <= held.version {
		return fmt.Errorf("delta to %d does not grow %d", plan.GetVersion(), held.version)
	}
	for _, n := range plan.GetRemove() {
		delete(held.peers, n)
	}
	for _, p := range plan.GetUpsert() {
		held.peers[p.GetNodeName()] = p
	}
	if s := plan.GetSettings(); s != nil {
		held.settings = s
	}
	held.version = plan.GetVersion()
	return nil
}

// sameAsFull reports how held differs from the full plan for node.
func sameAsFull(tb *Table, node string, held *replica) error {
	full, _ := tb.Delta(node, 0)
	want := map[string]*agentv1.ProbePeer{}
	for _, p := range full.GetUpsert() {
		if p.GetNodeName() == node {
			return fmt.Errorf("full plan of %q has itself", node)
		}
		want[p.GetNodeName()] = p
	}
	if len(want) != len(held.peers) {
		return fmt.Errorf("node %q holds %d peers, full plan has %d", node, len(held.peers), len(want))
	}
	for n, p := range want {
		if !proto.Equal(p, held.peers[n]) {
			return fmt.Errorf("node %q holds peer %v, full plan has %v", node, held.peers[n], p)
		}
	}
	if !proto.Equal(full.GetSettings(), held.settings) {
		return fmt.Errorf("node %q holds settings %v, full plan has %v", node, held.settings, full.GetSettings())
	}
	return nil
}

// testPeer returns a valid peer named name whose fields vary with v.
func testPeer(name string, v int) Peer {
	p := Peer{Name: name, HostIP: netip.AddrFrom4([4]byte{10, 0, byte(v >> 8), byte(v)}), ProbePort: 7000 + uint32(v%3)}
	if v%2 == 0 {
		p.PodIP = netip.AddrFrom4([4]byte{10, 244, byte(v >> 8), byte(v)})
		p.PodMTU = 1450
	}
	if v%4 == 0 {
		p.ServiceIP = netip.AddrFrom4([4]byte{10, 96, byte(v >> 8), byte(v)})
		p.HTTPPort = 8080
	}
	return p
}

func testSettings(v int) *agentv1.ProbeSettings {
	return &agentv1.ProbeSettings{PayloadBytes: uint32(56 + v), Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP}}
}

// chain drives a table and replicas from a stream of operation bytes and
// checks after every sync that each replica equals its full plan.
type chain struct {
	tb       *Table
	replicas []*replica
	nodes    []string
}

func newChain(followers int) *chain {
	c := &chain{tb: NewTable(Options{FirstRevision: 1000})}
	for i := range followers {
		c.nodes = append(c.nodes, fmt.Sprintf("node-%d", i))
		c.replicas = append(c.replicas, &replica{})
	}
	return c
}

// step runs operation op with argument a on c.
func (c *chain) step(op, a byte) error {
	name := fmt.Sprintf("node-%d", a%24) // followers are among the names
	switch op % 8 {
	case 0, 1, 2:
		before := c.tb.Revision()
		rev, changed, err := c.tb.Upsert(testPeer(name, int(a/24)%5))
		if err != nil {
			return err
		}
		if changed != (rev == before+1) || !changed && rev != before {
			return fmt.Errorf("upsert: rev %d after %d, changed %v", rev, before, changed)
		}
	case 3:
		c.tb.Remove(name)
	case 4:
		if a%3 == 0 {
			c.tb.SetSettings(nil)
		} else {
			c.tb.SetSettings(testSettings(int(a % 4)))
		}
	case 5:
		c.tb.mu.Lock()
		c.tb.compact(int(a % 4))
		c.tb.mu.Unlock()
	case 6:
		c.replicas[int(a)%len(c.replicas)] = &replica{} // a reconnect
	case 7:
		return c.sync(int(a) % len(c.replicas))
	}
	return nil
}

// sync brings replica i up to date with one Delta and checks it.
func (c *chain) sync(i int) error {
	node, held := c.nodes[i], c.replicas[i]
	plan, full := c.tb.Delta(node, held.version)
	if plan == nil {
		if held.version == 0 {
			return errors.New("nil plan for a replica with nothing")
		}
	} else {
		if full != (plan.GetBaseVersion() == 0) {
			return fmt.Errorf("full %v, base_version %d", full, plan.GetBaseVersion())
		}
		if plan.GetVersion() != c.tb.Revision() {
			return fmt.Errorf("plan version %d, revision %d", plan.GetVersion(), c.tb.Revision())
		}
		if slices.Contains(plan.GetRemove(), node) || slices.ContainsFunc(plan.GetUpsert(), func(p *agentv1.ProbePeer) bool { return p.GetNodeName() == node }) {
			return fmt.Errorf("plan of %q names itself: %v", node, plan)
		}
		if !full && plan.GetSettings() == nil && len(plan.GetUpsert())+len(plan.GetRemove()) == 0 {
			return errors.New("empty delta instead of nil")
		}
		if err := Apply(held, plan); err != nil {
			return err
		}
	}
	return sameAsFull(c.tb, node, held)
}

func (c *chain) syncAll() error {
	for i := range c.replicas {
		if err := c.sync(i); err != nil {
			return err
		}
	}
	return nil
}

func TestDeltaChainProperty(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			c := newChain(5)
			for i := range 3000 {
				if err := c.step(byte(rng.IntN(256)), byte(rng.IntN(256))); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if err := c.syncAll(); err != nil {
				t.Fatal(err)
			}
			c.tb.mu.RLock()
			defer c.tb.mu.RUnlock()
			if len(c.tb.log) > 2*c.tb.live+compactSlack {
				t.Errorf("changelog has %d records for %d peers", len(c.tb.log), c.tb.live)
			}
		})
	}
}

func FuzzDeltaChain(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 7, 0, 3, 2, 7, 0})
	f.Add([]byte{0, 1, 7, 0, 3, 1, 5, 0, 7, 0, 0, 1, 7, 0})
	f.Add([]byte{4, 1, 7, 1, 4, 0, 7, 1, 0, 25, 3, 25, 0, 49, 7, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := newChain(3)
		for i := 0; i+1 < len(ops); i += 2 {
			if err := c.step(ops[i], ops[i+1]); err != nil {
				t.Fatalf("op %d (%d, %d): %v", i/2, ops[i], ops[i+1], err)
			}
		}
		if err := c.syncAll(); err != nil {
			t.Fatal(err)
		}
	})
}
