package registry

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/queue"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// This file holds the acknowledgement of client results and the late
// answers that no Dispatch waits for.

// Bounds of a session's queue of late results.
const (
	// maxLateQueue is how many late results a session holds for the late
	// handler; beyond it they are left with the agent, which sends them
	// again on its next session.
	maxLateQueue = 20000
	// maxLateBytes bounds the encoded size of the late results a session
	// holds, likewise: 20,000 results of the 4 MiB a message may have
	// would be 80 GiB.
	maxLateBytes = 32 << 20
	// maxLateBatch is the most late results one handler call gets.
	maxLateBatch = 500
)

// queueLate queues a client answer for the late handler; it reports false
// when the queue is full (maxLateQueue results or maxLateBytes).
func (s *session) queueLate(r *agentv1.WorkResult) bool {
	size := proto.Size(r)
	s.mu.Lock()
	full := len(s.late) >= maxLateQueue || s.lateBytes+size > maxLateBytes
	if !full {
		s.late = append(s.late, r)
		s.lateBytes += size
	}
	s.mu.Unlock()
	if !full {
		signal(s.lateReady)
	}
	return !full
}

// takeLate returns up to maxLateBatch queued late results, oldest first.
func (s *session) takeLate() []*agentv1.WorkResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := queue.TakeFront(&s.late, maxLateBatch)
	for _, r := range out {
		s.lateBytes -= proto.Size(r)
	}
	return out
}

// LateHandler takes answers to run_client work that no Dispatch waits for:
// the caller gave up, or the agent sends again what a coordinator (maybe a
// previous one) never acknowledged. It gets them in the order node's agent
// sent them, on a goroutine of that agent's session, one call at a time per
// session, and ctx ends with the session's stream. It must acknowledge
// (Registry.Ack) what it stored or will never store; what it leaves
// unacknowledged, the agent sends again on its next session.
type LateHandler func(ctx context.Context, node string, results []*agentv1.WorkResult)

// HandleLate makes h the handler of late client answers (see LateHandler);
// nil means none: they are logged and left with the agent.
func (r *Registry) HandleLate(h LateHandler) {
	r.mu.Lock()
	r.late = h
	r.mu.Unlock()
}

// Ack tells node's agent that the answers to its run_client work workIDs
// (each a Work's work_id, sent as ResultAck.work_ids and, for an agent of
// the previous version, test_ids) are stored, or never will be, so that
// it may forget them. It never blocks. Acks queued before a Dispatch to the same
// node reach the agent before that Dispatch's work. Without a session for
// node the ack is dropped: the agent sends those answers again when it
// reconnects, and they are acknowledged then.
func (r *Registry) Ack(node string, workIDs ...string) {
	if len(workIDs) == 0 {
		return
	}
	r.mu.Lock()
	s := r.sessions[node]
	r.mu.Unlock()
	if s == nil {
		r.log.Debug("ack for a node without session dropped; its agent will send the results again", "node", node, "work_ids", len(workIDs))
		return
	}
	s.ack(workIDs)
}

// unclaimed deals with a WorkResult that no Dispatch waits for: a client
// answer goes to the late handler, anything else is only logged.
func (r *Registry) unclaimed(s *session, wr *agentv1.WorkResult) {
	if kind, _ := resultKind(wr); kind != actionRunClient {
		r.warn.Warn(r.log, s.node.Name, "work result nobody waits for", "work_id", protocol.ResultWorkID(wr))
		return
	}
	if !s.queueLate(wr) {
		r.warn.Warn(r.log, s.node.Name, "too many late client results queued; this one stays with the agent until its next session",
			"work_id", protocol.ResultWorkID(wr), "queued", maxLateQueue)
	}
}

// handleLate passes late client answers to the late handler, if any.
func (r *Registry) handleLate(ctx context.Context, node string, batch []*agentv1.WorkResult) {
	r.mu.Lock()
	h := r.late
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if h == nil {
		r.warn.Warn(r.log, node, "client results nobody waits for and no late handler; they stay with the agent",
			"results", len(batch), "first_work_id", protocol.ResultWorkID(batch[0]))
		return
	}
	h(ctx, node, batch)
}

// lateLoop hands the session's late client answers to the late handler, in
// batches, until the session ends; what is still queued then stays with the
// agent, which sends it again on its next session.
func (r *Registry) lateLoop(ctx context.Context, s *session) {
	for {
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			return
		case <-s.lateReady:
		}
		for {
			batch := s.takeLate()
			if len(batch) == 0 {
				break
			}
			r.handleLate(ctx, s.node.Name, batch)
			select {
			case <-s.done:
				return
			default:
			}
		}
	}
}
