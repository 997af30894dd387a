package fleet

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/queue"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// This file holds one session of a simulated agent: the stream's only
// sender (its queue and the heartbeats), the receive loop that sorts the
// coordinator's messages (and answers work at once), and the loop that
// follows the plan and sends reports and gossip views on their timers.
// The heartbeats follow the agent's rules (internal/protocol: the bounds,
// the proposal, the answer); the send loop is the agent's
// (agent/session.go, Agent.sendLoop) without the spool and the gossip
// views.

// session runs one stream: connect and register, send again the reports
// the last coordinator did not acknowledge, then follow the plan until
// the stream fails or ctx ends. It returns the error of the failed send
// or receive, or ctx's, once its send and receive loops ended.
func (a *simAgent) session(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, r, err := a.connect(ctx, conn)
	if err != nil {
		return err
	}
	hb := protocol.Heartbeats{Interval: r.GetHeartbeatInterval().AsDuration(), Timeout: r.GetHeartbeatTimeout().AsDuration()}
	if err := hb.Check(); err != nil {
		return err
	}
	pt := &planTracker{f: a.f, plan: &heldPlan{peers: newBitset(a.f.cfg.Nodes)}, joined: time.Now()}
	known := a.f.join(a)                       // the agents it could know of
	pt.before = int(a.f.registered.Add(1)) - 1 // agents registered before this one
	a.f.lastJoin.Store(pt.joined.UnixNano())
	defer a.f.registered.Add(-1)

	var wg sync.WaitGroup
	defer wg.Wait() // after the cancel below: both loops end with ctx
	defer cancel()
	out := make(chan *agentv1.ConnectRequest, 64)
	sendErr := make(chan error, 1)
	in := inbox{
		plans:     make(chan *agentv1.ProbePlan, 16),
		reporting: make(chan bool, 1),
		retune:    make(chan protocol.Heartbeats, 1),
		err:       make(chan error, 1),
	}
	wg.Go(func() { // owner: session; ends with ctx
		sendLoop(ctx, stream, hb.Interval, out, in.retune, sendErr, cancel)
	})
	send := func(m *agentv1.ConnectRequest) {
		select {
		case out <- m:
		case <-ctx.Done():
		}
	}
	wg.Go(func() { // owner: session; ends when Recv fails after cancel
		a.recvLoop(ctx, stream, in, send, cancel)
	})
	for _, r := range a.pending() { // what the last coordinator did not acknowledge
		send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: r}})
	}
	defer pt.leave()
	err = a.follow(ctx, r, known, pt, in, send)
	select {
	case err = <-sendErr:
	case err = <-in.err:
	default:
	}
	return err
}

// sendLoop is the session's only sender on stream: the messages queued on
// out, a heartbeat every interval, and at once the answer to each
// heartbeats proposal taken on retune, after which the heartbeats go at
// the proposed interval. It ends with ctx, or at the first failed send,
// whose error it puts on errc (capacity 1) before it cancels the session.
func sendLoop(ctx context.Context, stream agentStream, interval time.Duration, out <-chan *agentv1.ConnectRequest,
	retune <-chan protocol.Heartbeats, errc chan<- error, cancel context.CancelFunc) {
	beat := time.NewTicker(interval)
	defer beat.Stop()
	for {
		var m *agentv1.ConnectRequest
		select {
		case m = <-out:
		case <-beat.C:
			m = protocol.HeartbeatRequest(nil)
		case p := <-retune:
			beat.Reset(p.Interval)
			m = protocol.HeartbeatRequest(&p)
		case <-ctx.Done():
			return
		}
		if err := stream.Send(m); err != nil {
			errc <- err
			cancel()
			return
		}
	}
}

// inbox carries what the receive loop takes from the coordinator to the
// rest of the session; the receive loop is the only sender on each.
type inbox struct {
	// plans are the ProbePlans, in order (capacity 16).
	plans chan *agentv1.ProbePlan
	// reporting is GossipReporting's report, the latest only (capacity 1).
	reporting chan bool
	// retune is the latest heartbeats proposal taken
	// (protocol.ProposedHeartbeats), for sendLoop (capacity 1).
	retune chan protocol.Heartbeats
	// err is the receive error that ended the loop (capacity 1).
	err chan error
}

// recvLoop receives until the stream fails (which cancels the session
// and puts the error on in.err) or, handing on a plan, until ctx ends. It
// counts and records report acks, answers work at once through send
// (work.go), and passes plans, gossip reporting and heartbeat proposals
// on in.
func (a *simAgent) recvLoop(ctx context.Context, stream agentStream, in inbox, send func(*agentv1.ConnectRequest), cancel context.CancelFunc) {
	for {
		m, err := stream.Recv()
		if err != nil {
			in.err <- err
			cancel()
			return
		}
		switch msg := m.GetMsg().(type) {
		case *agentv1.ConnectResponse_ProbePlan:
			select {
			case in.plans <- msg.ProbePlan:
			case <-ctx.Done():
				return
			}
		case *agentv1.ConnectResponse_ReportAck:
			a.f.acked.Add(int64(len(msg.ReportAck.GetSeqs())))
			a.ack(msg.ReportAck.GetSeqs())
		case *agentv1.ConnectResponse_Work:
			// A Work's timeout counts from its arrival, on this clock.
			arrived := time.Now()
			if r := answer(msg.Work, arrived, arrived); r != nil {
				a.f.work.Add(1)
				send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: r}})
			}
		case *agentv1.ConnectResponse_GossipReporting:
			queue.PutLatest(in.reporting, msg.GossipReporting.GetReport())
		case *agentv1.ConnectResponse_Heartbeat:
			if p, ok, _ := protocol.ProposedHeartbeats(msg.Heartbeat); ok { // refused: keeps its heartbeats, as an agent does
				queue.PutLatest(in.retune, p)
			}
		}
	}
}

// follow is the session's loop once registered (r) until ctx ends: it
// applies and acknowledges the plans (pt), sends a report every report
// interval from a per-agent phase once the plan has settings (with
// Config.Reports), and sends the gossip views (Config.Gossip) as an agent
// does: whole at registration (as of known agents) unless the
// coordinator asked for quiet, whole again when GossipReporting turns them
// on, and every GossipEvery while on. It returns ctx's error.
func (a *simAgent) follow(ctx context.Context, r *agentv1.Registered, known int, pt *planTracker, in inbox, send func(*agentv1.ConnectRequest)) error {
	var gossipC <-chan time.Time
	g := time.NewTicker(a.f.cfg.GossipEvery)
	defer g.Stop()
	setViews := func(on bool, n int) {
		if !a.f.cfg.Gossip || on == (gossipC != nil) {
			return
		}
		if gossipC = nil; on {
			send(a.gossipView(n))
			g.Reset(a.f.cfg.GossipEvery)
			gossipC = g.C
		}
	}
	setViews(!r.GetGossipQuiet(), known)
	reportC := make(<-chan time.Time)
	var reportT *time.Ticker
	defer func() {
		if reportT != nil {
			reportT.Stop()
		}
	}()
	var phase *time.Timer
	var phaseC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-in.plans:
			send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: pt.apply(p)}})
			pt.count()
			if a.f.cfg.Reports && pt.plan.settings != nil && reportT == nil && phase == nil {
				// A per-agent phase spreads the fleet's reports over the period.
				every := pt.plan.settings.GetReportInterval().AsDuration()
				phase = time.NewTimer(time.Duration(a.rng.Int64N(int64(every))))
				phaseC = phase.C
			}
		case <-phaseC:
			phaseC = nil
			reportT = time.NewTicker(pt.plan.settings.GetReportInterval().AsDuration())
			reportC = reportT.C
		case <-reportC:
			send(a.report(pt.plan))
		case <-gossipC:
			send(a.gossipView(int(a.f.joins.Load())))
		case on := <-in.reporting:
			setViews(on, int(a.f.joins.Load()))
		}
	}
}

// planTracker is a session's plan and what the fleet's counters say of
// it: plans taken and refused, the time to a plan current as of the
// registration, and whether the agent counts in Stats.Current.
type planTracker struct {
	f    *Fleet
	plan *heldPlan
	// joined is the session's registration; before the agents registered
	// before it.
	joined time.Time
	before int
	// gotFirst: a plan listed at least before peers; current: the agent
	// counts in Fleet.current (its plan lists every other agent).
	gotFirst, current bool
}

// apply counts p, applies it to the held plan, and returns the PlanAck
// that answers it (with the refusal, if any).
func (t *planTracker) apply(p *agentv1.ProbePlan) *agentv1.PlanAck {
	t.f.plans.Add(1)
	t.f.planPeers.Add(int64(len(p.GetUpsert()) + len(p.GetRemove())))
	ack := &agentv1.PlanAck{}
	if err := t.plan.apply(p); err != nil {
		t.f.planRefused.Add(1)
		ack.Error = err.Error()
	}
	ack.Version = t.plan.version
	return ack
}

// count updates the fleet's plan counters after apply (its ack sent): the
// first plan current as of the registration, and the agent's entering or
// leaving Fleet.current (the last to enter marks convergence).
func (t *planTracker) count() {
	if !t.gotFirst && t.plan.peers.count >= t.before {
		t.gotFirst = true
		storeMax(&t.f.firstMaxNanos, time.Since(t.joined).Nanoseconds())
	}
	if full := t.plan.peers.count == t.f.cfg.Nodes-1; full != t.current {
		t.current = full
		if full {
			if t.f.current.Add(1) == int64(t.f.cfg.Nodes) {
				t.f.convergedAt.Store(time.Now().UnixNano())
			}
			storeMax(&t.f.latencyMaxNanos, time.Since(t.joined).Nanoseconds())
		} else {
			t.f.current.Add(-1)
		}
	}
}

// leave takes the ended session's agent out of Fleet.current.
func (t *planTracker) leave() {
	if t.current {
		t.f.current.Add(-1)
	}
}
