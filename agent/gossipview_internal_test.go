package agent

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/meshperf/meshperf/agent/gossip"
)

// TestGossipViewsNext: after a whole view, next lists only the members
// whose state or address changed and, as forgotten, those no longer
// listed; nil when nothing changed; a whole view each time for a
// coordinator without deltas.
func TestGossipViewsNext(t *testing.T) {
	addr := netip.MustParseAddrPort("10.0.0.1:7946")
	other := netip.MustParseAddrPort("10.0.0.9:7946")
	m := func(name string, st gossip.State, a netip.AddrPort) gossip.Member {
		return gossip.Member{Name: name, State: st, Addr: a}
	}
	first := []gossip.Member{m("a", gossip.StateAlive, addr), m("b", gossip.StateAlive, addr), m("c", gossip.StateDead, addr)}
	for _, tt := range []struct {
		name      string
		deltas    bool
		next      []gossip.Member
		wantNil   bool
		wantDelta bool
		want      []string // "name:STATE", sorted
	}{
		{"nothing changed", true, first, true, false, nil},
		{"one state", true, []gossip.Member{m("a", gossip.StateAlive, addr), m("b", gossip.StateSuspect, addr), m("c", gossip.StateDead, addr)},
			false, true, []string{"b:GOSSIP_STATE_SUSPECT"}},
		{"an address", true, []gossip.Member{m("a", gossip.StateAlive, other), m("b", gossip.StateAlive, addr), m("c", gossip.StateDead, addr)},
			false, true, []string{"a:GOSSIP_STATE_ALIVE"}},
		{"forgotten and new", true, []gossip.Member{m("a", gossip.StateAlive, addr), m("b", gossip.StateAlive, addr), m("d", gossip.StateLeft, addr)},
			false, true, []string{"c:GOSSIP_STATE_FORGOTTEN", "d:GOSSIP_STATE_LEFT"}},
		{"no deltas: whole", false, first, false, false, []string{"a:GOSSIP_STATE_ALIVE", "b:GOSSIP_STATE_ALIVE", "c:GOSSIP_STATE_DEAD"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGossipViews(tt.deltas)
			if v := g.whole(first).GetGossipView(); v.GetDelta() || len(v.GetMembers()) != len(first) {
				t.Fatalf("whole view: delta %v, %d members", v.GetDelta(), len(v.GetMembers()))
			}
			msg := g.next(tt.next)
			if (msg == nil) != tt.wantNil {
				t.Fatalf("next = %v, want nil: %v", msg, tt.wantNil)
			}
			if msg == nil {
				return
			}
			v := msg.GetGossipView()
			if v.GetDelta() != tt.wantDelta {
				t.Errorf("delta = %v, want %v", v.GetDelta(), tt.wantDelta)
			}
			var got []string
			for _, mb := range v.GetMembers() {
				got = append(got, mb.GetNodeName()+":"+mb.GetState().String())
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("members = %v, want %v", got, tt.want)
			}
			if again := g.next(tt.next); tt.deltas && again != nil {
				t.Errorf("next again with no change = %v, want nil", again)
			}
		})
	}
}
