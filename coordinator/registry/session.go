package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/queue"
	"github.com/meshperf/meshperf/internal/safetext"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// Bounds of a session's queues of acknowledgements and held work (the
// late results' are in late.go).
const (
	// maxAckBatch is the most work IDs one ResultAck carries.
	maxAckBatch = 1000
	// maxHeld is the most work, all of it with callers still waiting,
	// that a session holds while its agent's probe plan is in flight;
	// beyond it the session ends (far beyond what a run sends one node).
	maxHeld = 4096
)

// session is one agent's stream. Only Serve's goroutine sends on the stream.
type session struct {
	node           Node
	out            chan *agentv1.Work
	endpointsDirty chan struct{}
	acksDirty      chan struct{} // a ResultAck is to be sent
	lateReady      chan struct{} // late results are queued
	done           chan struct{} // closed by end
	endOnce        sync.Once
	endErr         error

	// follower, if set, is the session's view of the probe plans; only
	// the session loop touches it. planVersion is the version the agent
	// acknowledged, for readers outside the loop.
	follower        *probeplan.Follower
	planVersion     atomic.Uint64
	reportAcksDirty chan struct{} // a ReportAck is to be sent
	// reporter says the agent sends gossip views (Config.GossipReporters),
	// under the registry's mu; reportDirty is signalled when it became one
	// after its Registered, so that the loop sends GossipReporting.
	reporter    bool
	reportDirty chan struct{}
	// hb holds the session's heartbeat parameters (Registry.heartbeats):
	// set before the session is attached, changed by its loop once the
	// agent took a proposal (heartbeat.go), read by any goroutine.
	hb atomic.Pointer[heartbeatParams]
	// attachedAt is when the session was attached; proven is set once it
	// proved its node (unproven.go).
	attachedAt time.Time
	proven     atomic.Bool

	mu         sync.Mutex
	reportAcks []uint64 // report seqs to acknowledge
	pending    map[pendingKey]chan *agentv1.WorkResult
	seen       time.Time
	acks       []string              // work IDs to acknowledge
	late       []*agentv1.WorkResult // client answers nobody waited for
	lateBytes  int                   // the encoded size of late
}

func newSession(node Node) *session {
	return &session{
		node: node, out: make(chan *agentv1.Work, 16), endpointsDirty: make(chan struct{}, 1),
		acksDirty: make(chan struct{}, 1), lateReady: make(chan struct{}, 1), reportAcksDirty: make(chan struct{}, 1),
		reportDirty: make(chan struct{}, 1), done: make(chan struct{}), pending: map[pendingKey]chan *agentv1.WorkResult{}, seen: time.Now(),
	}
}

// ack queues work IDs for the next ResultAck; it never blocks.
func (s *session) ack(testIDs []string) {
	s.mu.Lock()
	s.acks = append(s.acks, testIDs...)
	s.mu.Unlock()
	signal(s.acksDirty)
}

// takeAcks returns up to maxAckBatch queued work IDs, oldest first.
func (s *session) takeAcks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return queue.TakeFront(&s.acks, maxAckBatch)
}

// signal wakes the reader of a 1-buffered channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // already pending
	}
}

func (s *session) end(err error) {
	s.endOnce.Do(func() {
		s.endErr = err
		close(s.done)
	})
}

func (s *session) touch(t time.Time) {
	s.mu.Lock()
	s.seen = t
	s.mu.Unlock()
}

func (s *session) lastSeen() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// call queues w and waits for its answer.
func (s *session) call(ctx context.Context, key pendingKey, w *agentv1.Work) (*agentv1.WorkResult, error) {
	ch := make(chan *agentv1.WorkResult, 1)
	s.mu.Lock()
	if _, dup := s.pending[key]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("node %q: work %q of kind %d is already in flight", s.node.Name, key.workID, key.kind)
	}
	s.pending[key] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, key)
		s.mu.Unlock()
	}()

	select {
	case s.out <- w:
	case <-s.done:
		return nil, s.goneErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-ch:
		return r, nil
	case <-s.done:
		return nil, s.goneErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// awaited reports whether w's caller still waits for its answer: false
// once Dispatch gave up (its context ended), so that held work nobody
// waits for is never sent. Work that gets no answer (cancel_client) is
// always awaited.
func (s *session) awaited(w *agentv1.Work) bool {
	kind, err := workKind(w)
	if err != nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[pendingKey{workID: protocol.WorkID(w), kind: kind}]
	return ok
}

func (s *session) goneErr() error {
	return fmt.Errorf("node %q: %w: session ended: %v", s.node.Name, ErrAgentUnavailable, s.endErr) //nolint:errorlint // the sentinel decides errors.Is; the cause is text only
}

// deliver hands a WorkResult to its waiting caller without ever blocking;
// it reports false if nobody waits (a late answer after the caller gave
// up) or an answer for that work was already delivered.
func (s *session) deliver(r *agentv1.WorkResult) bool {
	kind, ok := resultKind(r)
	if !ok {
		return false
	}
	s.mu.Lock()
	ch, ok := s.pending[pendingKey{workID: protocol.ResultWorkID(r), kind: kind}]
	s.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case ch <- r: // buffered 1: the first answer wins
		return true
	default: // a duplicate answer: never block the session on it
		return false
	}
}

// Serve runs one agent session on stream until the agent leaves, its
// heartbeats stop, a newer session of the same node replaces it, or ctx
// ends. The first message must be a Register; the error then wraps
// ErrVersionMismatch or ErrBadRegistration. Other endings return
// ErrHeartbeatTimeout, ErrReplaced, ctx's error, a stream error, or nil when
// the agent closed its side.
func (r *Registry) Serve(ctx context.Context, stream Stream) error {
	recvC := make(chan *agentv1.ConnectRequest, 16)
	recvErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	// lastRecv is when the agent last sent anything, stamped on arrival so
	// that a busy session loop never mistakes a live agent for a dead one.
	var lastRecv atomic.Int64
	lastRecv.Store(time.Now().UnixNano())
	// attached is the session once it is attached: from then on the
	// receiver takes gossip views itself (they are judged by the
	// evaluator, off every session loop), so that a view waits for
	// nothing and is not queued, whole, behind a loop busy sending.
	var attached atomic.Pointer[session]
	go func() { // owner: Serve; ends when Recv fails, which it does once Serve returns and gRPC cancels the stream
		for first := true; ; first = false {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			lastRecv.Store(time.Now().UnixNano())
			if hb := m.GetHeartbeat(); !first && hb != nil && hb.GetInterval() == nil {
				continue // its arrival is all it says: it never waits for the loop
			}
			if gv := m.GetGossipView(); gv != nil {
				if s := attached.Load(); s != nil {
					if err := r.gossipView(s, gv); err != nil {
						r.warn.Warn(r.log, s.node.Name, "gossip view refused", "err", err)
					}
					continue
				}
			}
			select {
			case recvC <- m:
			case <-stop:
				return
			}
		}
	}()

	first := time.NewTimer(r.cfg.HeartbeatTimeout)
	defer first.Stop()
	var reg *agentv1.Register
	select {
	case m := <-recvC:
		if reg = m.GetRegister(); reg == nil {
			return fmt.Errorf("%w: the first message must be a Register", ErrBadRegistration)
		}
	case err := <-recvErr:
		return fmt.Errorf("before registration: %w", err)
	case <-first.C:
		return fmt.Errorf("%w: no Register within %v", ErrHeartbeatTimeout, r.cfg.HeartbeatTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	node, err := r.admit(ctx, reg)
	if err != nil {
		return err
	}
	if r.isExternalName(node.Name) {
		return fmt.Errorf("%w: node name %q is the name of an external target in the coordinator's config (results to the target carry it as dst_node); rename the target",
			ErrBadRegistration, node.Name)
	}
	// Until attached or refused: its Service must outlive a prune, and
	// another registration of the node waits for its turn.
	done, err := r.markRegistering(ctx, node.Name)
	if err != nil {
		return fmt.Errorf("waiting for the node's previous registration: %w", err)
	}
	node, retryServiceIP := r.resolveServiceIP(ctx, node)
	if err := r.checkConflicts(node); err != nil {
		done()
		return err
	}
	s := newSession(node)
	if r.cfg.Probes != nil && node.ProbePort != 0 {
		s.follower = r.cfg.Probes.Follow(node.Name, r.cfg.PlanDebounce)
		defer s.follower.Stop()
	}
	// Set before attach: once attached, GossipGone reads them (liveSession).
	s.hb.Store(r.heartbeats())
	// Attach before answering, so that the agent is dispatchable as soon
	// as it knows it is registered.
	err = r.attach(ctx, s, reg)
	done()
	if err != nil {
		return err
	}
	attached.Store(s)
	err = stream.Send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
		CoordinatorVersion: r.cfg.Version,
		HeartbeatInterval:  durationpb.New(s.heartbeat().interval),
		HeartbeatTimeout:   durationpb.New(s.heartbeat().timeout),
		GossipSeeds:        r.gossipSeeds(node.Name),
		GossipDeltas:       true,
		GossipQuiet:        node.GossipPort != 0 && !r.isReporter(s),
	}}})
	if err != nil {
		err = fmt.Errorf("send registered: %w", err)
		r.detach(ctx, s)
		s.end(err)
		return err
	}
	log := r.log.With("node", node.Name)
	log.Info("agent registered", "version", reg.GetAgentVersion(), "host_ip", node.HostIP, "pod_ip", node.PodIP, "service_ip", node.ServiceIP,
		"gossip_port", node.GossipPort)
	lateDone := make(chan struct{})
	go func() { // owner: Serve; ends with the session (s.done)
		defer close(lateDone)
		r.lateLoop(ctx, s)
	}()
	stopRetry := func() {}
	if retryServiceIP {
		retryCtx, cancel := context.WithCancel(ctx)
		retryDone := make(chan struct{})
		go func() { // owner: Serve; ends with stopRetry, before the detach
			defer close(retryDone)
			r.retryServiceIP(retryCtx, s)
		}()
		stopRetry = func() { cancel(); <-retryDone }
	}
	err = r.loop(ctx, stream, s, recvC, recvErr, &lastRecv)
	stopRetry()
	r.heardFrom(s, time.Unix(0, lastRecv.Load()))
	r.detach(ctx, s) // first: whoever sees the session end sees the node gone
	s.end(err)
	<-lateDone
	log.Info("agent session ended", "err", err)
	return err
}

func (r *Registry) loop(ctx context.Context, stream Stream, s *session, recvC <-chan *agentv1.ConnectRequest, recvErr <-chan error, lastRecv *atomic.Int64) error {
	heartbeat := time.NewTicker(s.heartbeat().interval)
	defer heartbeat.Stop()
	watchdog := time.NewTimer(s.heartbeat().timeout)
	defer watchdog.Stop()
	var proposed *heartbeatParams // proposed to the agent, not yet taken
	send := func(m *agentv1.ConnectResponse) error {
		if err := stream.Send(m); err != nil {
			return fmt.Errorf("send to agent: %w", err)
		}
		return nil
	}
	// The first Endpoints (for a follower, the external targets) goes out
	// at once, before any work.
	signal(s.endpointsDirty)
	var planC <-chan struct{}
	// A full plan waits for a plan slot (planSlot); a delta takes none.
	slot := &planSlot{slots: r.planSlots, hold: r.cfg.PlanSlotHold}
	defer slot.give()
	haveSlot := func() bool { return s.follower.Version() != 0 || slot.ready() }
	// sent sends plan (nil: none was due) and gives the slot back unless
	// a full plan is now in flight.
	sent := func(plan *agentv1.ProbePlan) error {
		if plan != nil {
			if err := send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ProbePlan{ProbePlan: plan}}); err != nil {
				return err
			}
		}
		if inFlight, ok := s.follower.InFlight(); !ok || inFlight.BaseVersion != 0 {
			slot.give() // no full plan in flight
		}
		planC = s.follower.C()
		return nil
	}
	sendPlan := func() error {
		if s.follower == nil {
			return nil
		}
		if !haveSlot() {
			planC = nil // until a slot is free
			return nil
		}
		return sent(s.follower.Next())
	}
	if s.follower != nil {
		planC = s.follower.C()
	}
	// Work waits while a plan is in flight: the agent checks a Work's
	// target against its plan, which must name every peer registered
	// before the work was sent. Work whose caller gave up meanwhile is
	// dropped, so held grows with the callers still waiting only, never
	// with an agent that leaves its plan unacknowledged, and past
	// maxHeld the session ends.
	var held []*agentv1.Work
	hold := func(w *agentv1.Work) error {
		held = slices.DeleteFunc(held, func(w *agentv1.Work) bool { return !s.awaited(w) })
		if len(held) >= maxHeld {
			return fmt.Errorf("%d works wait for the agent to acknowledge its probe plan", len(held))
		}
		held = append(held, w)
		return nil
	}
	// planRefused: the agent refused its last full plan; work no longer
	// waits for plans (it would wait forever) until one is taken.
	planRefused := false
	sendWork := func(w *agentv1.Work) error {
		// Acknowledgements queued before this work go before it: an ack
		// of an earlier answer must not reach the agent after the new
		// answer with the same work ID (a retry) exists.
		if err := sendAcks(s, send); err != nil {
			return err
		}
		return send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Work{Work: w}})
	}
	flushPlan := func() (ready bool, err error) {
		if s.follower == nil || planRefused {
			return true, nil
		}
		if !haveSlot() {
			planC = nil // until a slot is free
			return false, nil
		}
		if err := sent(s.follower.Flush()); err != nil {
			return false, err
		}
		_, inFlight := s.follower.InFlight()
		return !inFlight, nil
	}
	// drainHeld sends the held work once no plan is in flight, after the
	// plan it waits for (built now if one is due).
	drainHeld := func() error {
		if len(held) == 0 {
			return nil
		}
		ready, err := flushPlan()
		if err != nil {
			return err
		}
		for ready && len(held) > 0 {
			w := held[0]
			held = held[1:]
			if !s.awaited(w) {
				continue
			}
			if err := sendWork(w); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return s.endErr
		case <-s.reportDirty:
			err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_GossipReporting{
				GossipReporting: &agentv1.GossipReporting{Report: r.isReporter(s)}}})
		case slot.wanted() <- struct{}{}:
			slot.took()
			if len(held) > 0 {
				err = drainHeld()
			} else {
				err = sendPlan()
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("receive from agent: %w", err)
		case m := <-recvC:
			s.touch(time.Now())
			if wr := m.GetWorkResult(); wr != nil {
				r.received(s, wr) // bounded, then delivered or late
			}
			if gv := m.GetGossipView(); gv != nil {
				if err := r.gossipView(s, gv); err != nil {
					r.warn.Warn(r.log, s.node.Name, "gossip view refused", "err", err)
				}
			}
			if ack := m.GetPlanAck(); ack != nil && s.follower != nil {
				ack.Error, _ = safetext.Bound(ack.GetError(), safetext.MaxMessageBytes) // it goes into the log
				sent, _ := s.follower.InFlight()
				full := sent.BaseVersion == 0
				if err := s.follower.Acked(ack); err != nil {
					r.warn.Warn(r.log, s.node.Name, "probe plan", "err", err)
				}
				slot.give()
				planRefused = ack.GetError() != "" && full
				s.planVersion.Store(s.follower.Version())
				planC = s.follower.C()
				if err := drainHeld(); err != nil {
					return err
				}
			}
			if rep := m.GetProbeReport(); rep != nil {
				r.probeReport(s, rep)
			}
			if hb := m.GetHeartbeat(); hb != nil && proposed.takenBy(hb) {
				// The agent took the proposal: from now on both sides use it.
				s.hb.Store(proposed)
				heartbeat.Reset(proposed.interval)
				watchdog.Reset(proposed.timeout)
				r.log.Debug("heartbeats changed", "node", s.node.Name, "interval", proposed.interval, "timeout", proposed.timeout)
				proposed = nil
			}
		case <-watchdog.C:
			silent := time.Since(time.Unix(0, lastRecv.Load()))
			if to := s.heartbeat().timeout; silent < to {
				watchdog.Reset(to - silent)
				break
			}
			return fmt.Errorf("%w: nothing from the agent for %v", ErrHeartbeatTimeout, silent.Round(time.Millisecond))
		case <-heartbeat.C:
			s.touch(time.Unix(0, lastRecv.Load())) // the agent's heartbeats stop at the receiver
			r.heardFrom(s, time.Unix(0, lastRecv.Load()))
			hb := &agentv1.Heartbeat{SendTime: timestamppb.Now()}
			if want := r.heartbeats(); s.heartbeat().retune(want) {
				proposed = want // again at every heartbeat until taken: an old agent ignores it
				hb.Interval, hb.Timeout = durationpb.New(want.interval), durationpb.New(want.timeout)
			} else {
				proposed = nil
			}
			err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Heartbeat{Heartbeat: hb}})
		case <-s.endpointsDirty:
			err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: r.endpoints(s)}})
		case <-planC:
			err = sendPlan()
		case <-s.acksDirty:
			err = sendAcks(s, send)
		case <-s.reportAcksDirty:
			err = sendReportAcks(s, send)
		case w := <-s.out:
			// Endpoints and a due plan first: the agent checks a Work's
			// target against them.
			select {
			case <-s.endpointsDirty:
				if err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: r.endpoints(s)}}); err != nil {
					return err
				}
			default:
			}
			ready, ferr := flushPlan()
			switch {
			case ferr != nil:
				err = ferr
			case !ready || len(held) > 0:
				err = hold(w)
			default:
				err = sendWork(w)
			}
		}
		if err != nil {
			return err
		}
	}
}

// sendAcks sends every queued acknowledgement, in ResultAcks of at most
// maxAckBatch work IDs (each also in the deprecated test_ids, for agents
// of the previous version).
func sendAcks(s *session, send func(*agentv1.ConnectResponse) error) error {
	for {
		ids := s.takeAcks()
		if len(ids) == 0 {
			return nil
		}
		if err := send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ResultAck{ResultAck: protocol.NewResultAck(ids)}}); err != nil {
			return err
		}
	}
}

// Shutdown ends every session with ErrShutdown and refuses new ones, so
// that a graceful gRPC stop does not wait for agent streams.
//
// It also stops the gossip evaluator and waits for it. It may be called
// more than once.
func (r *Registry) Shutdown() {
	r.mu.Lock()
	if !r.closed {
		close(r.evalStop)
	}
	r.closed = true
	evalDone := r.evalDone
	sessions := make([]*session, 0, len(r.sessions))
	for _, s := range r.sessions {
		sessions = append(sessions, s)
	}
	r.mu.Unlock()
	for _, s := range sessions {
		s.end(ErrShutdown)
	}
	if evalDone != nil {
		<-evalDone
	}
}
