package agent

import (
	"time"

	"github.com/meshperf/meshperf/agent/gossip"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The pacing of a session's gossip views (variables so that tests can
// shorten them). The first view of a session is whole; after it, to a
// coordinator that takes deltas (Registered.gossip_deltas), only deltas:
//
//   - gossipDebounce after memberlist signals a change (signals within it
//     coalesce), a delta of every change since the previous view: at
//     most one view per gossipDebounce, however busy the pool;
//   - every gossipViewRefresh, a delta if anything changed that
//     memberlist signals none of (a suspicion), else nothing;
//   - every gossipResync, a whole view: the coordinator's copy is rebuilt
//     even if a delta was lost to it (e.g. refused before a whole view).
//
// A coordinator that predates deltas gets a whole view at each of these
// instead, as before them.
var (
	gossipDebounce    = time.Second
	gossipViewRefresh = 30 * time.Second
	gossipResync      = 10 * time.Minute
)

// sentMember is what a session last sent of a member.
type sentMember struct {
	state measurev1.GossipState
	addr  string
}

// gossipViews builds one session's gossip views and remembers what the
// coordinator holds (the last whole view with every delta since), so that
// a delta lists only what changed against it. Not safe for concurrent
// use: the session's sendLoop owns it.
type gossipViews struct {
	deltas bool                  // the coordinator takes deltas
	sent   map[string]sentMember // the coordinator's copy of this view
}

// newGossipViews returns the builder of a session whose coordinator takes
// deltas or not.
func newGossipViews(deltas bool) *gossipViews {
	return &gossipViews{deltas: deltas, sent: map[string]sentMember{}}
}

// whole returns the whole view of members and records it as sent.
func (g *gossipViews) whole(members []gossip.Member) *agentv1.ConnectRequest {
	clear(g.sent)
	v := &agentv1.GossipView{Members: make([]*agentv1.GossipMember, 0, len(members))}
	for _, m := range members {
		sm := sentMember{state: m.State, addr: m.Addr.String()}
		g.sent[m.Name] = sm
		v.Members = append(v.Members, &agentv1.GossipMember{NodeName: m.Name, State: sm.state, Address: sm.addr})
	}
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_GossipView{GossipView: v}}
}

// next returns what to send of members after the first view: the delta
// against what was sent (nil if nothing changed), or the whole view if the
// coordinator takes no deltas. It records it as sent.
func (g *gossipViews) next(members []gossip.Member) *agentv1.ConnectRequest {
	if !g.deltas {
		return g.whole(members)
	}
	v := &agentv1.GossipView{Delta: true}
	listed := make(map[string]bool, len(members))
	for _, m := range members {
		listed[m.Name] = true
		sm := sentMember{state: m.State, addr: m.Addr.String()}
		if old, ok := g.sent[m.Name]; ok && old == sm {
			continue
		}
		g.sent[m.Name] = sm
		v.Members = append(v.Members, &agentv1.GossipMember{NodeName: m.Name, State: sm.state, Address: sm.addr})
	}
	for name := range g.sent {
		if !listed[name] {
			delete(g.sent, name)
			v.Members = append(v.Members, &agentv1.GossipMember{NodeName: name, State: measurev1.GossipState_GOSSIP_STATE_FORGOTTEN})
		}
	}
	if len(v.Members) == 0 {
		return nil
	}
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_GossipView{GossipView: v}}
}
