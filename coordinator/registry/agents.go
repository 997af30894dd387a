package registry

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/protoconv"

	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// This file holds the registry's views of the known agents: the list with
// their states (ListAgents), and which of them a default mesh covers.

// Agents returns every known agent, sorted by node name, with what gossip
// says of it now (at most membership.MaxBy reporters named per list) and
// the partition, if any, as of the latest evaluation (gossip.go).
func (r *Registry) Agents() []*meshv1.Agent {
	r.expireUnproven()
	r.mu.Lock()
	names := slices.Collect(maps.Keys(r.known))
	r.mu.Unlock()
	gossip := r.gossip.Statuses(names)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*meshv1.Agent, 0, len(r.known))
	now := time.Now()
	for name, rec := range r.known {
		a := protoconv.APIAgent(rec) // the answer is built from the record, never shares it
		if s, ok := r.sessions[name]; ok {
			a.LastSeenTime = timestamppb.New(s.lastSeen())
		}
		g := gossip[name]
		a.GossipState, a.GossipAliveBy, a.GossipDeadBy, a.Partition = g.State, g.AliveBy, g.DeadBy, g.Partition
		a.State = r.state(rec, now, g.Gone())
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *meshv1.Agent) int { return strings.Compare(a.GetNodeName(), b.GetNodeName()) })
	return out
}

// ErrUnknownNode means no agent ever registered under that node name.
var ErrUnknownNode = errors.New("unknown node")

// state is where a known node stands; gossipGone says that gossip
// declares it dead or left, which makes a connected node unavailable only
// once its session is no longer live (liveSession). Caller holds r.mu.
func (r *Registry) state(a *storev1.Agent, now time.Time, gossipGone bool) meshv1.NodeState {
	s, connected := r.sessions[a.GetNodeName()]
	switch {
	case connected && a.GetMaintenance():
		return meshv1.NodeState_NODE_STATE_MAINTENANCE
	case connected && gossipGone && !liveSession(s, now):
		return meshv1.NodeState_NODE_STATE_UNAVAILABLE
	case connected && !s.node.PodIP.IsValid():
		return meshv1.NodeState_NODE_STATE_PENDING
	case connected:
		return meshv1.NodeState_NODE_STATE_READY
	case !r.proven[a.GetNodeName()] && now.Sub(a.GetLastSeenTime().AsTime()) > r.cfg.UnprovenGrace,
		now.Sub(a.GetLastSeenTime().AsTime()) > r.cfg.DepartAfter:
		return meshv1.NodeState_NODE_STATE_DEPARTED
	case a.GetMaintenance():
		return meshv1.NodeState_NODE_STATE_MAINTENANCE
	}
	return meshv1.NodeState_NODE_STATE_UNAVAILABLE
}

// Known returns, sorted, the names of the nodes a default mesh covers
// (mesh) and of the nodes a run may name in its pairs (targetable). A mesh
// covers pending, ready and unavailable nodes: a lost agent is a failure to
// report, not a smaller mesh. Nodes in maintenance are targetable but not
// in default meshes; departed nodes (gone longer than DepartAfter) are
// neither, so nodes an autoscaler removed do not pile up. A node whose
// agent left unproven (unproven.go) is targetable, never in default meshes.
func (r *Registry) Known() (mesh, targetable []string) {
	r.expireUnproven()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for name, a := range r.known {
		switch r.state(a, now, false) { // gossip only turns a mesh node unavailable: still in meshes
		case meshv1.NodeState_NODE_STATE_DEPARTED:
		case meshv1.NodeState_NODE_STATE_MAINTENANCE:
			targetable = append(targetable, name)
		default:
			targetable = append(targetable, name)
			if !r.unprovenGoneLocked(name) {
				mesh = append(mesh, name)
			}
		}
	}
	slices.Sort(mesh)
	slices.Sort(targetable)
	return mesh, targetable
}
