package registry

import (
	"context"
	"slices"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// This file bounds what sessions that register and go away can leave
// behind, and the texts of the answers sessions send.
//
// A node is proven once one of its sessions showed that a working agent
// runs it: the session answered work the coordinator dispatched to it
// (a WorkResult delivered to a waiting Dispatch), or had a probe report
// taken, or was heard from (a heartbeat or any message) at least its
// heartbeat timeout after its registration, the time in which the
// coordinator would have dropped a silent session. A node whose agent left
// before it was ever proven is out of default meshes and of the probe
// plans at once, and is forgotten (in memory and in the store)
// Config.UnprovenGrace after it was last seen. Only a proven node whose
// agent is gone stays in meshes as agent_unavailable until DepartAfter.
// A restarted coordinator takes a stored node as proven unless its record
// shows a last session shorter than Config.HeartbeatTimeout.

// DefaultUnprovenGrace is Config.UnprovenGrace's default.
const DefaultUnprovenGrace = 3 * time.Minute

// maxUnprovenGone bounds the unproven nodes whose agents left that are
// kept through their grace: beyond it the longest gone are forgotten at
// once, so that a flood of made-up registrations costs a bounded memory
// and store.
const maxUnprovenGone = 1000

// agentDeleter is the optional part of a Recorder that forgets a node
// (coordinator/store.Store has it).
type agentDeleter interface {
	DeleteAgent(ctx context.Context, node string) error
}

// provenAtLoad says whether a stored agent counts as proven when the
// coordinator starts: unless its record shows a last session shorter than
// timeout.
func provenAtLoad(a *storev1.Agent, timeout time.Duration) bool {
	if a.GetConnected() || a.GetConnectTime() == nil || a.GetLastSeenTime() == nil {
		return true
	}
	return a.GetLastSeenTime().AsTime().Sub(a.GetConnectTime().AsTime()) >= timeout
}

// prove marks s's node proven, if s is still its session; how says what
// proved it, for the log.
func (r *Registry) prove(s *session, how string) {
	if s.proven.Load() {
		return
	}
	r.mu.Lock()
	current := r.sessions[s.node.Name] == s
	first := current && !r.proven[s.node.Name]
	if current {
		r.proven[s.node.Name] = true
		s.proven.Store(true)
	}
	r.mu.Unlock()
	if first {
		r.log.Debug("node proven: its agent works", "node", s.node.Name, "by", how)
	}
}

// heardFrom proves s's node once the agent was heard from at least the
// session's heartbeat timeout after its registration; lastRecv is when it
// was last heard from. The session loop calls it at every heartbeat.
func (r *Registry) heardFrom(s *session, lastRecv time.Time) {
	if !s.proven.Load() && lastRecv.Sub(s.attachedAt) >= s.heartbeat().timeout {
		r.prove(s, "heartbeats")
	}
}

// received takes a WorkResult from s's agent: its texts are bounded
// (protocol.BoundWorkResult, logged when they change), then it goes to
// the Dispatch that waits for it, which proves the node, or else to the
// late handler.
func (r *Registry) received(s *session, wr *agentv1.WorkResult) {
	if changed := protocol.BoundWorkResult(wr); len(changed) > 0 {
		r.log.Warn("agent answer texts escaped or cut (messages at most 4096 bytes, tool versions 256)",
			"node", s.node.Name, "work_id", protocol.ResultWorkID(wr), "fields", changed)
	}
	if s.deliver(wr) {
		r.prove(s, "answered work")
		return
	}
	r.unclaimed(s, wr)
}

// unprovenGoneLocked reports whether a known node's agent is gone and the
// node was never proven. Caller holds r.mu.
func (r *Registry) unprovenGoneLocked(name string) bool {
	_, connected := r.sessions[name]
	return !connected && !r.proven[name]
}

// leftUnproven takes a node whose session just ended out of the probe
// plans if it was never proven.
func (r *Registry) leftUnproven(name string) {
	r.mu.Lock()
	_, peer := r.peers[name]
	out := peer && r.unprovenGoneLocked(name)
	if out {
		delete(r.peers, name)
	}
	r.mu.Unlock()
	if out && r.cfg.Probes != nil {
		r.cfg.Probes.Remove(name)
	}
	r.expireUnproven() // bounds the unproven ones kept (maxUnprovenGone)
}

// expireUnproven forgets the nodes whose agents left unproven longer than
// Config.UnprovenGrace ago, and the longest gone beyond maxUnprovenGone
// (not those registering again now), and deletes their stored records.
func (r *Registry) expireUnproven() {
	now := time.Now()
	var gone, peersGone []string
	r.mu.Lock()
	type left struct {
		name string
		seen time.Time
	}
	var kept []left
	for name, a := range r.known {
		if !r.unprovenGoneLocked(name) || r.registeringLocked(name) {
			continue
		}
		if seen := a.GetLastSeenTime().AsTime(); now.Sub(seen) <= r.cfg.UnprovenGrace {
			kept = append(kept, left{name, seen})
			continue
		}
		gone = append(gone, name)
	}
	if len(kept) > maxUnprovenGone {
		slices.SortFunc(kept, func(a, b left) int { return a.seen.Compare(b.seen) })
		for _, k := range kept[:len(kept)-maxUnprovenGone] {
			gone = append(gone, k.name)
		}
	}
	for _, name := range gone {
		delete(r.known, name)
		delete(r.proven, name)
		if _, peer := r.peers[name]; peer {
			delete(r.peers, name)
			peersGone = append(peersGone, name)
		}
	}
	r.mu.Unlock()
	for _, name := range peersGone {
		r.cfg.Probes.Remove(name) // only nodes that probe are peers: Probes is set
	}
	if len(gone) == 0 {
		return
	}
	slices.Sort(gone)
	d, canDelete := r.cfg.Recorder.(agentDeleter)
	for _, name := range gone {
		r.log.Warn("registration expired: the node's agent left before it ever proved itself (answered work, sent a probe report or outlived its heartbeat timeout)",
			"node", name, "grace", r.cfg.UnprovenGrace, "max_unproven_kept", maxUnprovenGone)
		if canDelete {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := d.DeleteAgent(ctx, name); err != nil {
				r.log.Error("forget expired node", "node", name, "err", err)
			}
			cancel()
		}
	}
}
