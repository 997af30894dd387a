package registry

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/meshperf/meshperf/coordinator/membership"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// maxGossipMembers bounds one gossip view, so that one agent cannot bloat
// the coordinator's memory.
const maxGossipMembers = 5000

// GossipGone reports whether the connected agents' gossip declares node
// dead or left, and which of them do. Such a node gets no work: its tests
// fail at once as agent_unavailable.
func (r *Registry) GossipGone(node string) (deadBy []string, gone bool) {
	v := r.gossip.Verdict(node)
	return v.DeadBy, v.Gone()
}

// gossipSeeds returns the gossip addresses of the connected agents other
// than node that gossip, sorted.
func (r *Registry) gossipSeeds(node string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var seeds []string
	for name, s := range r.sessions {
		if name != node && s.node.GossipPort != 0 {
			seeds = append(seeds, netip.AddrPortFrom(s.node.HostIP, s.node.GossipPort).String())
		}
	}
	slices.Sort(seeds)
	return seeds
}

// gossipView takes an agent's gossip view, if s is still its node's
// session, and re-evaluates the partitions (which logs those that appeared
// or ended).
func (r *Registry) gossipView(s *session, v *agentv1.GossipView) error {
	if err := validateGossipView(v); err != nil {
		return err
	}
	r.mu.Lock()
	current := r.sessions[s.node.Name] == s
	r.mu.Unlock()
	if !current {
		return nil
	}
	r.gossip.SetView(s.node.Name, v.GetMembers())
	r.evaluateGossip()
	return nil
}

// evaluateGossip judges every known node against the sessions.
func (r *Registry) evaluateGossip() map[string]membership.Status {
	r.mu.Lock()
	nodes := make(map[string]bool, len(r.known))
	for name := range r.known {
		_, connected := r.sessions[name]
		nodes[name] = connected
	}
	r.mu.Unlock()
	return r.gossip.Evaluate(nodes)
}

// validateGossipView refuses a view too large, with a member that has no
// valid node name, or with a state this coordinator does not know.
func validateGossipView(v *agentv1.GossipView) error {
	if n := len(v.GetMembers()); n > maxGossipMembers {
		return fmt.Errorf("gossip view of %d members, at most %d", n, maxGossipMembers)
	}
	for i, m := range v.GetMembers() {
		if err := protocol.ValidateNodeName(m.GetNodeName()); err != nil {
			return fmt.Errorf("gossip view: members[%d]: %w", i, err)
		}
		if _, ok := agentv1.GossipState_name[int32(m.GetState())]; !ok || m.GetState() == agentv1.GossipState_GOSSIP_STATE_UNSPECIFIED {
			return fmt.Errorf("gossip view: members[%d] (%s): state %d is not a gossip state", i, m.GetNodeName(), m.GetState())
		}
	}
	return nil
}
