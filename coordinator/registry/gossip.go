package registry

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/meshperf/meshperf/coordinator/membership"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/stringers"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrNotReporter is gossipView's error for a view from a session that is
// not one of the gossip reporters: the view is ignored.
var ErrNotReporter = errors.New("gossip view from a session that is not a reporter")

// maxGossipMembers bounds one gossip view, so that one agent cannot bloat
// the coordinator's memory.
const maxGossipMembers = 5000

// GossipGone reports whether the connected agents' gossip declares node
// dead or left, on a quorum of the reporters that know it
// (membership.Quorum), and which of them do (at most membership.MaxBy),
// while the coordinator has no live session with the node: gossip alone
// never takes a node whose session's heartbeats are recent (liveSession)
// out of the mesh. Such a node gets no work: its tests fail at once as
// agent_unavailable. It costs O(1) unless the node is gone.
func (r *Registry) GossipGone(node string) (deadBy []string, gone bool) {
	if !membership.StateGone(r.gossip.State(node)) {
		return nil, false
	}
	r.mu.Lock()
	s := r.sessions[node]
	r.mu.Unlock()
	if liveSession(s, time.Now()) {
		return nil, false
	}
	v := r.gossip.Verdict(node)
	return v.DeadBy, v.Gone()
}

// recentHeartbeats is how many of its heartbeat intervals a session may
// be silent for and still count as live (liveSession): the coordinator
// notes the latest message once an interval, so a healthy session is
// silent for up to two.
const recentHeartbeats = 3

// liveSession reports whether s, a node's session (nil for none), heard
// from its agent within recentHeartbeats intervals before now: gossip
// alone does not make such a node unavailable.
func liveSession(s *session, now time.Time) bool {
	return s != nil && now.Sub(s.lastSeen()) <= recentHeartbeats*s.heartbeat().interval
}

// gossipSeeds returns the gossip addresses of up to maxGossipSeeds of the
// connected agents other than node that gossip, sorted. Which ones is left
// to the map's random iteration order, so that a join wave spreads over
// the pool instead of every agent joining through the same few; the cost
// is O(maxGossipSeeds) under the registry's lock, not O(agents) per
// registration (O(agents^2) for a wave).
func (r *Registry) gossipSeeds(node string) []string {
	var seeds []netip.AddrPort
	r.mu.Lock()
	for name, s := range r.sessions {
		if len(seeds) == maxGossipSeeds {
			break
		}
		if name != node && s.node.GossipPort != 0 {
			seeds = append(seeds, netip.AddrPortFrom(s.node.HostIP, s.node.GossipPort))
		}
	}
	r.mu.Unlock()
	out := stringers.Strings(seeds)
	slices.Sort(out)
	return out
}

// maxGossipSeeds bounds a Registered's gossip seeds: an agent joins the
// pool through a few of them (agent.maxSeeds), and one that answers is
// enough.
const maxGossipSeeds = 16

// gossipView takes an agent's gossip view, whole or a delta
// (GossipView.delta), if s is still its node's session and a reporter
// (ErrNotReporter otherwise), and has the
// evaluator re-evaluate the partitions. It costs O(members): the session
// loop never evaluates. A delta before the session's first whole view
// (which every agent sends first; one refused would leave none) is
// refused with membership.ErrNoView and ignored: the agent's next resync
// (a whole view every few minutes) restores the view.
func (r *Registry) gossipView(s *session, v *agentv1.GossipView) error {
	if err := validateGossipView(v); err != nil {
		return err
	}
	// Compact first: the message is not referred to past this point, so a
	// view waiting below for the registry's or the tracker's lock holds
	// its compact form only.
	delta, members := v.GetDelta(), membership.Compact(v.GetMembers())
	r.mu.Lock()
	current, reporter := r.sessions[s.node.Name] == s, s.reporter
	r.mu.Unlock()
	if !current {
		return nil
	}
	if !reporter {
		// Only reporters' views count (Config.GossipReporters): a session
		// told to be quiet, or that registered no gossip port, has no say.
		return fmt.Errorf("%w: node %q is not a gossip reporter (it registered no gossip port, or was told gossip_quiet)", ErrNotReporter, s.node.Name)
	}
	if delta {
		if err := r.gossip.UpdateMembers(s.node.Name, members); err != nil {
			return fmt.Errorf("gossip delta of %d members ignored until the next whole view: %w", members.Len(), err)
		}
	} else {
		r.gossip.SetMembers(s.node.Name, members)
	}
	r.kickGossip()
	return nil
}

// kickGossip tells the evaluator that views or sessions changed, starting
// it on the first call; it never blocks. The evaluator is owned by the
// registry: it returns once Shutdown closes r.evalStop, and Shutdown waits
// for it.
func (r *Registry) kickGossip() {
	r.mu.Lock()
	if !r.closed && r.evalDone == nil {
		r.evalDone = make(chan struct{})
		go r.evaluator(r.evalDone) // owner: the registry; ends at Shutdown
	}
	r.mu.Unlock()
	select {
	case r.evalKick <- struct{}{}:
	default: // one already pending
	}
}

// evaluator evaluates the partitions after each change (kickGossip), at
// most once per Config.GossipEvaluateInterval, and every interval while a
// disagreement waits out its grace, until r.evalStop is closed; then it
// closes done.
func (r *Registry) evaluator(done chan<- struct{}) {
	defer close(done)
	interval := r.cfg.GossipEvaluateInterval
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var last time.Time
	pending := false // a disagreement waits out its grace: evaluate again
	for {
		var tick <-chan time.Time
		if pending {
			tick = timer.C
			timer.Reset(max(time.Until(last.Add(interval)), 0))
		}
		select {
		case <-r.evalStop:
			return
		case <-r.evalKick:
		case <-tick:
		}
		if wait := time.Until(last.Add(interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-r.evalStop:
				return
			case <-timer.C:
			}
		}
		last = time.Now()
		r.evaluateGossip()
		pending = r.gossip.Pending()
	}
}

// evaluateGossip judges every known node against the sessions, which
// updates (and logs) the partitions Agents reports.
func (r *Registry) evaluateGossip() {
	r.mu.Lock()
	nodes := make(map[string]bool, len(r.known))
	for name := range r.known {
		_, connected := r.sessions[name]
		nodes[name] = connected
	}
	r.mu.Unlock()
	r.gossip.Evaluate(nodes)
}

// validateGossipView refuses a view or delta too large, with a member that
// has no valid node name, or with a state this coordinator does not know;
// GOSSIP_STATE_FORGOTTEN only in a delta.
func validateGossipView(v *agentv1.GossipView) error {
	kind := "gossip view"
	if v.GetDelta() {
		kind = "gossip delta"
	}
	if n := len(v.GetMembers()); n > maxGossipMembers {
		return fmt.Errorf("%s of %d members, at most %d", kind, n, maxGossipMembers)
	}
	for i, m := range v.GetMembers() {
		if err := protocol.ValidateNodeName(m.GetNodeName()); err != nil {
			return fmt.Errorf("%s: members[%d]: %w", kind, i, err)
		}
		st := m.GetState()
		if _, ok := measurev1.GossipState_name[int32(st)]; !ok || st == measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED {
			return fmt.Errorf("%s: members[%d] (%s): state %d is not a gossip state", kind, i, m.GetNodeName(), st)
		}
		if st == measurev1.GossipState_GOSSIP_STATE_FORGOTTEN && !v.GetDelta() {
			return fmt.Errorf("%s: members[%d] (%s): state %v only in a delta", kind, i, m.GetNodeName(), st)
		}
	}
	return nil
}
