package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/queue"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/version"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// errCoordinatorSilent ends a session whose coordinator sent nothing for
// its heartbeat timeout.
var errCoordinatorSilent = errors.New("no message from the coordinator within the heartbeat timeout")

// errNotRegistered ends a session whose coordinator did not answer the
// Register within Config.RegisterTimeout (the heartbeat watchdog only starts with
// the answer).
var errNotRegistered = errors.New("no answer to the registration")

// defaultRegisterTimeout is Config.RegisterTimeout's default.
const defaultRegisterTimeout = 30 * time.Second

// maxPendingPerSlot bounds the client runs an agent holds, running or
// waiting for one of its MaxClients slots, at this many per slot: the
// coordinator sends a node four at a time, and a coordinator that sends
// more is answered busy.
const maxPendingPerSlot = 4

// maxPendingWork bounds the other works (servers to start or stop) a
// session answers at once: a coordinator keeps a node in one heavy test
// at a time, so a few; a coordinator that sends more is answered busy.
const maxPendingWork = 64

// maxWorkBytes bounds one Work, unknown fields dropped: a client run's
// spec and target are a few hundred bytes. A larger one is refused, so a
// coordinator cannot make the agent hold (or spool, in its results) what
// it pleases.
const maxWorkBytes = 64 << 10

// register builds the Register message.
func (a *Agent) register(ctx context.Context) *agentv1.Register {
	reg := &agentv1.Register{
		NodeName: a.cfg.NodeName, AgentVersion: version.Version, ProtocolVersion: protocol.Version,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: a.cfg.HostIP.String(), MtuBytes: a.hostMTU}},
		Tools:     boundTools(a.runner.Tools(ctx)),
	}
	if a.cfg.PodIP.IsValid() {
		reg.Addresses = append(reg.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_POD, Ip: a.cfg.PodIP.String(), MtuBytes: a.podMTU})
	}
	// One entry per family and network: the IPv6 ones after the first
	// family's, so an older coordinator reading the first entries finds
	// what it did before.
	if a.cfg.HostIPv6.IsValid() {
		reg.Addresses = append(reg.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_HOST, Ip: a.cfg.HostIPv6.String(), MtuBytes: a.hostMTU})
	}
	if a.cfg.PodIPv6.IsValid() {
		reg.Addresses = append(reg.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_POD, Ip: a.cfg.PodIPv6.String(), MtuBytes: a.podMTU})
	}
	// service_ip is the IPv4 ClusterIP, service_ipv6 the IPv6 one: an
	// IPv6-only node's ServiceIP goes to service_ipv6.
	for _, ip := range []netip.Addr{a.cfg.ServiceIP, a.cfg.ServiceIPv6} {
		switch {
		case !ip.IsValid():
		case ip.Is4():
			reg.ServiceIp = ip.String()
		default:
			reg.ServiceIpv6 = ip.String()
		}
	}
	if a.gossip != nil {
		reg.GossipPort = a.cfg.GossipPort
	}
	reg.ProbePort, reg.HttpPort = a.cfg.ProbePort, a.cfg.HTTPPort
	// The ports of the servers' own config (New filled in the defaults):
	// the coordinator takes no ServerStarted with other ports.
	reg.Iperf3Port, reg.QperfPort, reg.QperfDataPort = a.cfg.Ports.Iperf3, a.cfg.Ports.Qperf, a.cfg.Ports.QperfData
	return reg
}

// session runs one stream: register, send again every result the spool
// holds, then heartbeats and work until the stream fails, the coordinator
// goes silent, or ctx ends. Server work still running when the session
// ends is canceled. The servers that run linger (servers.Manager.Linger):
// a client on another node may be in the middle of its test, and its
// result, kept by that node's agent for the next coordinator, would
// otherwise be a connection reset; they go once their client is done, at
// their bound, or when a new start needs their port. When ctx ends (the
// agent stops), every server is stopped instead. Client runs go on (until
// their deadline or ctx's end): their results wait in the spool for the
// next session. registered reports that
// the coordinator accepted the registration with usable heartbeat
// parameters.
func (a *Agent) session(ctx context.Context, conn *grpc.ClientConn) (registered bool, err error) {
	agentCtx := ctx // client runs outlive the session
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idCtx, err := a.withIdentity(ctx)
	if err != nil {
		return false, err
	}
	stream, err := agentv1.NewAgentServiceClient(conn).Connect(idCtx)
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: a.register(ctx)}}); err != nil {
		return false, fmt.Errorf("send register: %w", err)
	}
	regTimer := time.AfterFunc(a.cfg.RegisterTimeout, func() { cancel(errNotRegistered) })
	first, err := stream.Recv()
	regTimer.Stop()
	if err != nil {
		if errors.Is(context.Cause(ctx), errNotRegistered) {
			return false, fmt.Errorf("%w within %v", errNotRegistered, a.cfg.RegisterTimeout)
		}
		return false, err // keeps the gRPC status: a refusal is final for connectLoop
	}
	reg := first.GetRegistered()
	if reg == nil {
		return false, fmt.Errorf("coordinator answered the registration with %T, not Registered", first.GetMsg())
	}
	interval := reg.GetHeartbeatInterval().AsDuration()
	timeout := reg.GetHeartbeatTimeout().AsDuration()
	if err := (protocol.Heartbeats{Interval: interval, Timeout: timeout}).Check(); err != nil {
		return false, err
	}
	a.log.Info("registered with the coordinator", "coordinator_version", reg.GetCoordinatorVersion(), "heartbeat_interval", interval)

	ob := &outbox{ch: make(chan *agentv1.ConnectRequest, 16), done: ctx.Done()}
	// From here on, a client result is either in the backlog or handed to
	// this session's outbox, never both.
	a.outMu.Lock()
	backlog, perr := a.spool.Pending()
	reports, rerr := a.spool.PendingReports()
	a.current = ob
	a.outMu.Unlock()
	if perr != nil {
		a.log.Error("read the result spool; its results go with a later session", "err", perr)
	}
	if rerr != nil {
		a.log.Error("read the probe report spool; its reports go with a later session", "err", rerr)
	}
	// Also when there are none: a reader of the log (the lab's e2e tests)
	// knows from it how many "result sent ... resent=true" lines follow.
	a.log.Debug("result backlog read", "results", len(backlog))
	// reporting carries GossipReporting from this receive loop to the
	// sendLoop, the latest one first (capacity 1, replaced when full).
	reporting := make(chan bool, 1)
	// retuned carries the heartbeats the coordinator proposed and this
	// receive loop took to the sendLoop (capacity 1, the latest only).
	retuned := make(chan protocol.Heartbeats, 1)
	var wg sync.WaitGroup
	defer func() {
		a.outMu.Lock()
		if a.current == ob {
			a.current = nil
		}
		a.outMu.Unlock()
		cancel(err)
		wg.Wait()
		if agentCtx.Err() != nil {
			a.servers.StopAll() // the agent stops: no server outlives it
		} else {
			a.servers.Linger()
		}
	}()
	wg.Add(1)
	// The sendLoop starts with the registered interval; the coordinator's
	// later proposals reach it through retuned (this loop changes interval).
	firstInterval := interval
	go func() { // owner: session; ends with ctx
		defer wg.Done()
		a.sendLoop(ctx, stream, backlog, reports, ob.ch, firstInterval, reg.GetGossipDeltas(), !reg.GetGossipQuiet(), reporting, retuned, cancel)
	}()
	a.targets.setGossipSeeds(reg.GetGossipSeeds())
	a.updateGossipRegistered()
	if seeds := pickSeeds(reg.GetGossipSeeds()); a.gossip != nil && len(seeds) > 0 {
		wg.Add(1)
		go func() { // owner: session; bounded by ctx (and memberlist's TCP timeout)
			defer wg.Done()
			n, err := a.gossip.Join(ctx, seeds)
			if err != nil {
				a.log.Warn("join the gossip pool; the agent measures without it meanwhile", "seeds", seeds, "err", err)
				return
			}
			a.log.Info("joined the gossip pool", "seeds", seeds, "answered", n)
		}()
	}
	// pendingWork holds a place per work (not a client run) being answered:
	// at most maxPendingWork.
	pendingWork := make(chan struct{}, maxPendingWork)
	watchdog := time.AfterFunc(timeout, func() { cancel(errCoordinatorSilent) })
	defer watchdog.Stop()

	for {
		m, err := stream.Recv()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				return true, cause
			}
			return true, fmt.Errorf("receive: %w", err)
		}
		watchdog.Reset(timeout)
		switch msg := m.GetMsg().(type) {
		case *agentv1.ConnectResponse_Work:
			// A Work's timeout counts from here, on this agent's clock.
			arrived := time.Now()
			// What this agent does not know it does not keep (nor copy
			// into its answers).
			protocol.ClearUnknown(msg.Work)
			if n := proto.Size(msg.Work); n > maxWorkBytes {
				a.refuseNow(ob, msg.Work, arrived, measurev1.Status_STATUS_INVALID, "work of %d bytes, more than %d", n, maxWorkBytes)
				continue
			}
			id := protocol.WorkID(msg.Work)
			switch msg.Work.GetAction().(type) {
			case *agentv1.Work_RunClient:
				if n, most := a.inFlight.len(), maxPendingPerSlot*cap(a.clients); n >= most {
					// A run waits for a slot, and then for the session to
					// take its result, in a goroutine of its own: a flood
					// of them would grow without bound.
					a.refuseNow(ob, msg.Work, arrived, measurev1.Status_STATUS_BUSY, "%d client runs are running, waiting for a slot or for their result to be sent on this agent, the most it takes (%d x %d slots)",
						n, maxPendingPerSlot, cap(a.clients))
					continue
				}
				// With "result put in the spool", this tells a reader of the
				// log (the lab's e2e tests) which client runs are over.
				a.log.Debug("client run started", "work_id", id)
				// Registered here, in the order of the stream, so that a
				// cancel_client sent after it always finds it.
				runCtx, forget := a.inFlight.start(agentCtx, id)
				a.runs.Add(1)
				go func() { // owner: the agent (Run waits); bounded by the work's deadline, its cancel and the agent's ctx, not by this session
					defer a.runs.Done()
					r := a.handle(runCtx, msg.Work, arrived)
					// Counted until the result is handed over: a
					// coordinator that stops reading holds it here.
					defer forget()
					a.clientDone(r)
				}()
				continue
			case *agentv1.Work_CancelClient:
				// No answer: the canceled client's own answer says how it ended.
				found := a.inFlight.cancel(id)
				a.log.Info("cancel_client", "work_id", id, "running", found)
				continue
			}
			select {
			case pendingWork <- struct{}{}:
			default:
				a.refuseNow(ob, msg.Work, arrived, measurev1.Status_STATUS_BUSY, "%d works are being answered on this session, the most it takes", maxPendingWork)
				continue
			}
			wg.Add(1)
			go func() { // owner: session; bounded by the work's deadline and ctx
				defer wg.Done()
				defer func() { <-pendingWork }()
				r := a.handle(ctx, msg.Work, arrived)
				select {
				case ob.ch <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: r}}:
				case <-ctx.Done():
				}
			}()
		case *agentv1.ConnectResponse_Endpoints:
			a.targets.setEndpoints(msg.Endpoints)
			a.updateGossipRegistered()
		case *agentv1.ConnectResponse_ProbePlan:
			ack := a.applyPlan(msg.ProbePlan)
			select {
			case ob.ch <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: ack}}:
			case <-ctx.Done():
			}
		case *agentv1.ConnectResponse_ReportAck:
			n, err := a.spool.AckReports(msg.ReportAck.GetSeqs()...)
			if err != nil {
				a.log.Error("forget acknowledged probe reports; they will be sent again", "seqs", len(msg.ReportAck.GetSeqs()), "err", err)
			}
			a.log.Debug("probe reports acknowledged", "seqs", len(msg.ReportAck.GetSeqs()), "removed", n)
		case *agentv1.ConnectResponse_ResultAck:
			ids := protocol.AckedWorkIDs(msg.ResultAck)
			n, err := a.spool.Ack(ids...)
			if err != nil {
				a.log.Error("forget acknowledged results; they will be sent again", "work_ids", len(ids), "err", err)
			}
			a.log.Debug("results acknowledged", "work_ids", len(ids), "removed", n, "spooled", a.spool.Len())
		case *agentv1.ConnectResponse_GossipReporting:
			queue.PutLatest(reporting, msg.GossipReporting.GetReport()) // only the latest matters
			a.log.Info("gossip views", "report", msg.GossipReporting.GetReport())
		case *agentv1.ConnectResponse_Heartbeat:
			hb, ok, err := protocol.ProposedHeartbeats(msg.Heartbeat)
			if err != nil {
				a.log.Warn("heartbeat change refused; the session keeps its heartbeats", "interval", interval, "timeout", timeout, "err", err)
			}
			if !ok {
				continue
			}
			if hb.Interval != interval || hb.Timeout != timeout {
				a.log.Debug("heartbeats changed", "interval", hb.Interval, "timeout", hb.Timeout)
			}
			interval, timeout = hb.Interval, hb.Timeout
			watchdog.Reset(timeout)
			queue.PutLatest(retuned, hb) // only the latest matters
		case *agentv1.ConnectResponse_Registered:
		default:
			a.log.Warn("unknown message from the coordinator", "type", fmt.Sprintf("%T", msg))
		}
	}
}

// refuseNow answers w at once with status st and a message (format and
// args), unless w is refused anyway (no action, no ID, a bad timeout:
// that answer goes), without waiting: with the outbox full (a coordinator
// that does not read) the answer is dropped and logged. Nothing refused
// here is spooled: the spool is for measurements.
func (a *Agent) refuseNow(ob *outbox, w *agentv1.Work, arrived time.Time, st measurev1.Status, format string, args ...any) {
	ans, ok := protocol.StartAnswer(w, arrived)
	r := ans.Result
	if ok {
		r = ans.Fail(st, format, args...)
	}
	select {
	case ob.ch <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: r}}:
	default:
		a.log.Warn("work refused; the answer was dropped, the outbox being full", "work_id", safetext.Cut(ans.ID, 128), "status", st, "why", r.GetMessage())
	}
}

// clientDone puts a client's result into the spool, then hands it to the
// current session, if any, and waits until that session takes it or ends.
// Without a session, the result waits in the spool for the next one.
func (a *Agent) clientDone(r *agentv1.WorkResult) {
	a.outMu.Lock()
	err := a.spool.Put(r)
	ob := a.current
	a.outMu.Unlock()
	if err != nil {
		a.log.Error("result not spooled: lost if the coordinator does not store it", "work_id", protocol.ResultWorkID(r), "err", err)
	} else {
		a.log.Debug("result put in the spool", "work_id", protocol.ResultWorkID(r))
	}
	if ob == nil {
		if err != nil {
			a.log.Error("result lost: no session with the coordinator, and no room in the spool", "work_id", protocol.ResultWorkID(r))
		} else {
			a.log.Info("result spooled until the next session with the coordinator", "work_id", protocol.ResultWorkID(r))
		}
		return
	}
	select {
	case ob.ch <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: r}}:
	case <-ob.done: // the next session sends it from the spool
	}
}

// sendLoop is the only sender on the stream: first the backlog (spooled
// results, oldest first), then queued messages, a heartbeat every
// interval and, with gossip, the gossip views (whole first, then deltas if
// the coordinator takes them: see gossipDebounce) while the coordinator
// wants them: from the start if report (Registered.gossip_quiet unset),
// then as the latest value on reporting says (GossipReporting). It logs
// every client result it sent.
func (a *Agent) sendLoop(ctx context.Context, stream grpc.BidiStreamingClient[agentv1.ConnectRequest, agentv1.ConnectResponse],
	backlog []*agentv1.WorkResult, reports []*agentv1.ProbeReport, out <-chan *agentv1.ConnectRequest, interval time.Duration,
	deltas, report bool, reporting <-chan bool, retuned <-chan protocol.Heartbeats, cancel context.CancelCauseFunc) {
	if len(backlog) > 0 || len(reports) > 0 {
		a.log.Info("sending again what the coordinator has not acknowledged", "results", len(backlog), "reports", len(reports))
	}
	resend := make([]*agentv1.ConnectRequest, 0, len(backlog)+len(reports))
	for _, r := range backlog {
		resend = append(resend, &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: r}})
	}
	for _, r := range reports {
		resend = append(resend, &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: r}})
	}
	for _, m := range resend {
		if ctx.Err() != nil {
			return
		}
		if err := stream.Send(m); err != nil {
			cancel(fmt.Errorf("send: %w", err))
			return
		}
		if r := m.GetWorkResult(); r != nil {
			a.log.Info("result sent", "work_id", protocol.ResultWorkID(r), "status", r.GetStatus(), "resent", true)
		}
	}
	var changes <-chan struct{}                   // nil without gossip views: never ready
	var refresh, resync, settled <-chan time.Time // likewise; settled: the debounce after a change is over
	views := newGossipViews(deltas)
	debounce := time.NewTimer(gossipDebounce)
	debounce.Stop()
	defer debounce.Stop()
	rt := time.NewTicker(gossipViewRefresh)
	defer rt.Stop()
	st := time.NewTicker(gossipResync)
	defer st.Stop()
	viewsOn := false
	// setViews turns the gossip views on (a whole view now, then deltas,
	// refreshes and resyncs) or off; nil or the send's error.
	setViews := func(on bool) error {
		if a.gossip == nil || on == viewsOn {
			return nil
		}
		viewsOn = on
		if !on {
			changes, refresh, resync, settled = nil, nil, nil, nil
			debounce.Stop()
			return nil
		}
		changes, refresh, resync = a.gossip.Changes(), rt.C, st.C
		rt.Reset(gossipViewRefresh)
		st.Reset(gossipResync)
		return stream.Send(views.whole(a.gossip.Members()))
	}
	if err := setViews(report); err != nil {
		cancel(fmt.Errorf("send: %w", err))
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		var m *agentv1.ConnectRequest
		select {
		case <-ctx.Done():
			return
		case m = <-out:
		case on := <-reporting:
			if err := setViews(on); err != nil {
				cancel(fmt.Errorf("send: %w", err))
				return
			}
			continue
		case <-changes:
			if settled == nil { // else the pending debounce covers this change too
				debounce.Reset(gossipDebounce)
				settled = debounce.C
			}
			continue
		case <-settled:
			settled = nil
			if m = views.next(a.gossip.Members()); m == nil {
				continue
			}
		case <-refresh:
			if m = views.next(a.gossip.Members()); m == nil {
				continue
			}
		case <-resync:
			m = views.whole(a.gossip.Members())
		case <-tick.C:
			m = protocol.HeartbeatRequest(nil)
		case hb := <-retuned: // answered at once (protocol.HeartbeatRequest)
			tick.Reset(hb.Interval)
			m = protocol.HeartbeatRequest(&hb)
		}
		if err := stream.Send(m); err != nil {
			cancel(fmt.Errorf("send: %w", err))
			return
		}
		if r := m.GetWorkResult(); r.GetClientDone() != nil {
			a.log.Info("result sent", "work_id", protocol.ResultWorkID(r), "status", r.GetStatus(), "resent", false)
		}
	}
}

// maxSeeds is how many of the coordinator's seeds an agent joins through:
// one that answers is enough, and each is a full state exchange.
const maxSeeds = 3

// pickSeeds returns up to maxSeeds of seeds, chosen at random.
func pickSeeds(seeds []string) []string {
	seeds = slices.Clone(seeds)
	rand.Shuffle(len(seeds), func(i, j int) { seeds[i], seeds[j] = seeds[j], seeds[i] })
	return seeds[:min(len(seeds), maxSeeds)]
}
