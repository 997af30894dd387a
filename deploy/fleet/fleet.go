// Package fleet is a simulated fleet of agents for measuring the
// coordinator at cluster scale on one machine: N agents, each one real
// gRPC stream of the agent protocol (meshperf.agent.v1) to a real
// coordinator over loopback, that register with made-up loopback
// addresses, follow their probe plans (full, then deltas, acknowledged),
// send one ProbeReport per report period with plausible figures for every
// peer, path and kind of the plan, send gossip views as agents do at a
// join (see Config.Gossip), and answer on-demand
// work at once with plausible results. No agent sends a packet to any
// address: the fleet speaks only to the coordinator, on loopback.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/grpcbuf"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Config configures Run.
type Config struct {
	// Coordinator is the coordinator's agent address, a loopback
	// "host:port".
	Coordinator string
	// Nodes is the fleet's size, 1 to 10,000.
	Nodes int
	// StreamsPerConn is how many agents share one gRPC connection (HTTP/2
	// streams); zero means 1, a connection per agent as real agents have
	// (sharing hides per-connection costs: at 5,000 agents, 100 to a
	// connection halved the coordinator's CPU).
	StreamsPerConn int
	// JoinOver spreads the registrations evenly over this long; zero
	// means at once.
	JoinOver time.Duration
	// Reports makes the agents report their plans' probes; false means
	// plans only (the agents hold and acknowledge them).
	Reports bool
	// Gossip makes every agent send a whole gossip view (all alive) after
	// registering and every GossipEvery, and nothing in between: a real
	// agent sends only deltas between its resyncs, and in the simulation
	// nothing changes once the fleet joined. The view after registering
	// is what a real agent knows when it joins a pool during a join wave:
	// itself and the agents registered before its first registration (the
	// fleet's join order, an atomic counter); each resync lists every agent
	// registered by then.
	Gossip bool
	// GossipEvery is the period of the whole gossip views; zero means
	// 10 min (the agent's resync).
	GossipEvery time.Duration
	// Logger receives session errors; nil means discard.
	Logger *slog.Logger
}

// Stats are the fleet's counters; Run's caller reads them with Snapshot.
type Stats struct {
	// Registered counts agents that are registered now.
	Registered int64
	// Current counts agents whose plan lists every other agent of the
	// fleet (the full membership).
	Current int64
	// PlanLatencyMaxSeconds is the longest time from an agent's
	// registration to its plan listing every other agent.
	PlanLatencyMaxSeconds float64
	// FirstPlanMaxSeconds is the longest time from an agent's registration
	// to its plan listing at least as many peers as there were agents
	// registered before it: its plan current as of its registration.
	FirstPlanMaxSeconds float64
	// ConvergeSeconds is the time from the last registration to every
	// agent's plan listing every other agent; 0 until then.
	ConvergeSeconds float64
	// Plans counts ProbePlan messages, PlanPeers the peer entries they
	// carried (upserts and removals), PlanRefused the ones refused.
	Plans, PlanPeers, PlanRefused int64
	// Reports counts reports sent, Acked those acknowledged, Summaries
	// the summaries sent.
	Reports, Acked, Summaries int64
	// Work counts on-demand work answered.
	Work int64
	// SessionErrors counts sessions that ended in an error.
	SessionErrors int64
}

// membersField is GossipView.members' field number.
var membersField = (&agentv1.GossipView{}).ProtoReflect().Descriptor().Fields().ByName("members").Number()

// Fleet is a running simulated fleet.
type Fleet struct {
	cfg Config
	log *slog.Logger

	registered, current, plans, planPeers, planRefused atomic.Int64
	reports, acked, summaries, work, sessionErrors     atomic.Int64
	latencyMaxNanos                                    atomic.Int64
	firstMaxNanos, lastJoin, convergedAt               atomic.Int64

	mu     sync.Mutex
	agents []*simAgent

	// joins counts the agents registered so far (each once, at its first
	// registration); joinOrder[k] is 1 + the index of the k-th, 0 while
	// that agent has not stored it yet.
	joins     atomic.Int64
	joinOrder []atomic.Int32

	// members[i] is node i's alive gossip member as one element of
	// GossipView.members on the wire, encoded once: the views the fleet
	// sends are these bytes laid end to end, so that 5,000 agents' views
	// of 5,000 members cost the fleet (on the coordinator's machine) a copy
	// each instead of 25 million member encodings, which 5,000 real agents
	// on their own nodes would share out.
	members [][]byte
}

// Acked returns, per node, the period start of every report the
// coordinator acknowledged, by seq.
func (f *Fleet) Acked() map[string]map[uint64]time.Time {
	f.mu.Lock()
	agents := slices.Clone(f.agents)
	f.mu.Unlock()
	out := make(map[string]map[uint64]time.Time, len(agents))
	for _, a := range agents {
		a.mu.Lock()
		out[a.name] = maps.Clone(a.acked)
		a.mu.Unlock()
	}
	return out
}

// New checks cfg.
func New(cfg Config) (*Fleet, error) {
	if cfg.Nodes < 1 || cfg.Nodes > 10000 {
		return nil, fmt.Errorf("fleet: %d nodes, want 1 to 10000", cfg.Nodes)
	}
	if cfg.StreamsPerConn == 0 {
		cfg.StreamsPerConn = 1
	}
	if cfg.GossipEvery == 0 {
		cfg.GossipEvery = 10 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	members := make([][]byte, cfg.Nodes)
	for i := range members {
		m, err := proto.Marshal(&agentv1.GossipMember{NodeName: NodeName(i), State: agentv1.GossipState_GOSSIP_STATE_ALIVE, Address: hostIP(i) + ":7946"})
		if err != nil {
			return nil, fmt.Errorf("fleet: gossip member %d: %w", i, err)
		}
		members[i] = protowire.AppendBytes(protowire.AppendTag(nil, membersField, protowire.BytesType), m)
	}
	return &Fleet{cfg: cfg, log: log, joinOrder: make([]atomic.Int32, cfg.Nodes), members: members}, nil
}

// Snapshot returns the counters now.
func (f *Fleet) Snapshot() Stats {
	return Stats{
		Registered: f.registered.Load(), Current: f.current.Load(),
		PlanLatencyMaxSeconds: time.Duration(f.latencyMaxNanos.Load()).Seconds(),
		FirstPlanMaxSeconds:   time.Duration(f.firstMaxNanos.Load()).Seconds(),
		ConvergeSeconds:       converge(f.lastJoin.Load(), f.convergedAt.Load()),
		Plans:                 f.plans.Load(), PlanPeers: f.planPeers.Load(), PlanRefused: f.planRefused.Load(),
		Reports: f.reports.Load(), Acked: f.acked.Load(), Summaries: f.summaries.Load(), Work: f.work.Load(),
		SessionErrors: f.sessionErrors.Load(),
	}
}

// NodeName is the name of the fleet's i-th node.
func NodeName(i int) string { return fmt.Sprintf("sim-%05d", i) }

// nodeIndex is NodeName's inverse; -1 if name is none of the fleet's.
func nodeIndex(name string) int {
	if len(name) != 9 || name[:4] != "sim-" {
		return -1
	}
	i, err := strconv.Atoi(name[4:])
	if err != nil {
		return -1
	}
	return i
}

// hostIP and podIP are the made-up loopback addresses of node i: the
// coordinator checks them and never sends to them.
func hostIP(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }
func podIP(i int) string  { return fmt.Sprintf("127.2.%d.%d", i/250, i%250+1) }

// Run connects the fleet and keeps every agent's session (reconnecting
// after a second when one ends) until ctx ends.
func (f *Fleet) Run(ctx context.Context) error {
	conns := make([]*grpc.ClientConn, 0, f.cfg.Nodes/f.cfg.StreamsPerConn+1)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	var step time.Duration
	if f.cfg.Nodes > 1 {
		step = f.cfg.JoinOver / time.Duration(f.cfg.Nodes)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for i := range f.cfg.Nodes {
		if i%f.cfg.StreamsPerConn == 0 {
			c, err := grpc.NewClient(f.cfg.Coordinator, append(grpcbuf.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))...)
			if err != nil {
				return fmt.Errorf("fleet: dial %s: %w", f.cfg.Coordinator, err)
			}
			conns = append(conns, c)
		}
		conn := conns[len(conns)-1]
		wg.Go(func() { f.agent(ctx, conn, i) })
		if step > 0 {
			t.Reset(step)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
	<-ctx.Done()
	return nil
}

// agent keeps node i's sessions until ctx ends.
func (f *Fleet) agent(ctx context.Context, conn *grpc.ClientConn, i int) {
	a := &simAgent{f: f, i: i, name: NodeName(i), rng: rand.New(rand.NewPCG(uint64(i), 42)),
		unacked: map[uint64]*agentv1.ProbeReport{}, acked: map[uint64]time.Time{}}
	f.mu.Lock()
	f.agents = append(f.agents, a)
	f.mu.Unlock()
	t := time.NewTimer(0)
	defer t.Stop()
	for ctx.Err() == nil {
		err := a.session(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		f.sessionErrors.Add(1)
		f.log.Warn("simulated agent session ended", "node", a.name, "err", err)
		t.Reset(time.Second + time.Duration(a.rng.Int64N(int64(time.Second))))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// simAgent is one simulated agent's state across its sessions.
type simAgent struct {
	f    *Fleet
	i    int
	name string
	rng  *rand.Rand
	seq  uint64

	// mu guards the reports not yet acknowledged (resent, oldest first,
	// after every registration, as a real agent's spool does) and the
	// acknowledged ones' period starts.
	mu      sync.Mutex
	unacked map[uint64]*agentv1.ProbeReport
	acked   map[uint64]time.Time

	// joined is whether the agent is in the fleet's join order.
	joined bool
}

// ack records the coordinator's acknowledgement of seqs.
func (a *simAgent) ack(seqs []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, seq := range seqs {
		if r, ok := a.unacked[seq]; ok {
			delete(a.unacked, seq)
			a.acked[seq] = r.GetPeriodStart().AsTime()
		}
	}
}

// pending returns the unacknowledged reports, oldest first.
func (a *simAgent) pending() []*agentv1.ProbeReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*agentv1.ProbeReport, 0, len(a.unacked))
	for _, r := range a.unacked {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y *agentv1.ProbeReport) int { return cmp.Compare(x.GetSeq(), y.GetSeq()) })
	return out
}

// errBadPlan is a plan the simulated agent refuses (a delta on another
// version than it holds).
var errBadPlan = errors.New("plan refused")

// session runs one stream.
func (a *simAgent) session(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := agentv1.NewAgentServiceClient(conn).Connect(ctx)
	if err != nil {
		return err
	}
	reg := &agentv1.Register{
		NodeName: a.name, AgentVersion: "fleet", ProtocolVersion: protocol.Version,
		Addresses: []*agentv1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: hostIP(a.i), MtuBytes: 1500},
			{Network: measurev1.Network_NETWORK_POD, Ip: podIP(a.i), MtuBytes: 1450},
		},
		ProbePort: 7947, HttpPort: 8080,
	}
	if a.f.cfg.Gossip {
		reg.GossipPort = 7946
	}
	if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	r := first.GetRegistered()
	if r == nil {
		return fmt.Errorf("answer %T, not Registered", first.GetMsg())
	}
	joined := time.Now()
	known := a.f.join(a)                     // the agents it could know of
	before := int(a.f.registered.Add(1)) - 1 // agents registered before this one
	a.f.lastJoin.Store(joined.UnixNano())
	gotFirst := false
	defer a.f.registered.Add(-1)

	out := make(chan *agentv1.ConnectRequest, 64)
	sendErr := make(chan error, 1)
	// retune carries the coordinator's proposed heartbeats (the latest
	// only), which the fleet takes, as an agent does.
	retune := make(chan *agentv1.Heartbeat, 1)
	go func() { // owner: session; ends with ctx
		hb := time.NewTicker(r.GetHeartbeatInterval().AsDuration())
		defer hb.Stop()
		for {
			var m *agentv1.ConnectRequest
			select {
			case <-ctx.Done():
				return
			case m = <-out:
			case <-hb.C:
				m = &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{SendTime: timestamppb.Now()}}}
			case p := <-retune:
				hb.Reset(p.GetInterval().AsDuration())
				m = &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{SendTime: timestamppb.Now(),
					Interval: p.GetInterval(), Timeout: p.GetTimeout()}}}
			}
			if err := stream.Send(m); err != nil {
				sendErr <- err
				cancel()
				return
			}
		}
	}()
	send := func(m *agentv1.ConnectRequest) {
		select {
		case out <- m:
		case <-ctx.Done():
		}
	}
	plan := &heldPlan{peers: newBitset(a.f.cfg.Nodes)}
	var current bool
	planC := make(chan *agentv1.ProbePlan, 16)
	reportingC := make(chan bool, 1) // GossipReporting, the latest only
	recvErr := make(chan error, 1)
	go func() { // owner: session; ends when Recv fails after cancel
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				cancel()
				return
			}
			switch msg := m.GetMsg().(type) {
			case *agentv1.ConnectResponse_ProbePlan:
				select {
				case planC <- msg.ProbePlan:
				case <-ctx.Done():
					return
				}
			case *agentv1.ConnectResponse_ReportAck:
				a.f.acked.Add(int64(len(msg.ReportAck.GetSeqs())))
				a.ack(msg.ReportAck.GetSeqs())
			case *agentv1.ConnectResponse_Work:
				a.f.work.Add(1)
				send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: answer(msg.Work)}})
			case *agentv1.ConnectResponse_GossipReporting:
				select {
				case <-reportingC:
				default:
				}
				reportingC <- msg.GossipReporting.GetReport()
			case *agentv1.ConnectResponse_Heartbeat:
				if p := msg.Heartbeat; p.GetInterval().AsDuration() > 0 && p.GetTimeout().AsDuration() > 0 {
					select {
					case <-retune:
					default:
					}
					retune <- p
				}
			}
		}
	}()
	for _, r := range a.pending() { // what the last coordinator did not acknowledge
		send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: r}})
	}
	// Gossip views as an agent sends them: whole at registration unless
	// the coordinator asked for quiet, whole again when GossipReporting
	// turns them on, and every GossipEvery while on.
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
		if current {
			a.f.current.Add(-1)
		}
	}()
	var phase *time.Timer
	var phaseC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			select {
			case err := <-sendErr:
				return err
			case err := <-recvErr:
				return err
			default:
				return ctx.Err()
			}
		case p := <-planC:
			a.f.plans.Add(1)
			a.f.planPeers.Add(int64(len(p.GetUpsert()) + len(p.GetRemove())))
			ack := &agentv1.PlanAck{}
			if err := plan.apply(p); err != nil {
				a.f.planRefused.Add(1)
				ack.Error = err.Error()
			}
			ack.Version = plan.version
			send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: ack}})
			if !gotFirst && plan.peers.count >= before {
				gotFirst = true
				storeMax(&a.f.firstMaxNanos, time.Since(joined).Nanoseconds())
			}
			if full := plan.peers.count == a.f.cfg.Nodes-1; full != current {
				current = full
				if full {
					if a.f.current.Add(1) == int64(a.f.cfg.Nodes) {
						a.f.convergedAt.Store(time.Now().UnixNano())
					}
					storeMax(&a.f.latencyMaxNanos, time.Since(joined).Nanoseconds())
				} else {
					a.f.current.Add(-1)
				}
			}
			if a.f.cfg.Reports && plan.settings != nil && reportT == nil && phase == nil {
				// A per-agent phase spreads the fleet's reports over the period.
				every := plan.settings.GetReportInterval().AsDuration()
				phase = time.NewTimer(time.Duration(a.rng.Int64N(int64(every))))
				phaseC = phase.C
			}
		case <-phaseC:
			phaseC = nil
			reportT = time.NewTicker(plan.settings.GetReportInterval().AsDuration())
			reportC = reportT.C
		case <-reportC:
			send(a.report(plan))
		case <-gossipC:
			send(a.gossipView(int(a.f.joins.Load())))
		case on := <-reportingC:
			setViews(on, int(a.f.joins.Load()))
		}
	}
}

// report is one report period of the held plan, with plausible figures:
// every probe answered, RTTs around 100 us.
func (a *simAgent) report(h *heldPlan) *agentv1.ConnectRequest {
	s := h.settings
	every := s.GetReportInterval().AsDuration()
	sent := uint32(every / s.GetInterval().AsDuration())
	a.seq++
	r := &agentv1.ProbeReport{Seq: a.seq, PeriodStart: timestamppb.New(time.Now().Add(-every)), Period: durationpb.New(every),
		PlanVersion: h.version}
	r.Summaries = make([]*agentv1.ProbeSummary, 0, h.peers.count*len(s.GetPaths())*len(s.GetKinds()))
	for i := range h.peers.n {
		if !h.peers.has(i) {
			continue
		}
		dst := &agentv1.ProbeSummary_Node{Node: NodeName(i)}
		for _, path := range s.GetPaths() {
			for _, kind := range s.GetKinds() {
				med := 80e-6 + a.rng.Float64()*40e-6
				r.Summaries = append(r.Summaries, &agentv1.ProbeSummary{Dst: dst, Path: path, Kind: kind, Sent: sent, Received: sent,
					RttMinSeconds: med * 0.8, RttMedianSeconds: med, RttP90Seconds: med * 1.2, RttMaxSeconds: med * 1.5,
					Status: measurev1.Status_STATUS_OK})
			}
		}
	}
	a.f.reports.Add(1)
	a.f.summaries.Add(int64(len(r.Summaries)))
	a.mu.Lock()
	a.unacked[r.Seq] = r
	a.mu.Unlock()
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: r}}
}

// join puts a in the fleet's join order at its first registration and
// returns how many agents registered before it then; at a later
// registration, how many registered so far.
func (f *Fleet) join(a *simAgent) int {
	if a.joined {
		return int(f.joins.Load())
	}
	a.joined = true
	k := f.joins.Add(1) - 1
	f.joinOrder[k].Store(int32(a.i) + 1)
	return int(k)
}

// gossipView is a whole gossip view, every member alive: a itself and the
// first n agents of the fleet's join order (those that stored their place
// yet).
func (a *simAgent) gossipView(n int) *agentv1.ConnectRequest {
	n = min(n, len(a.f.joinOrder))
	raw := append(make([]byte, 0, (n+1)*len(a.f.members[a.i])), a.f.members[a.i]...)
	for k := range n {
		if i := int(a.f.joinOrder[k].Load()) - 1; i >= 0 && i != a.i {
			raw = append(raw, a.f.members[i]...)
		}
	}
	v := &agentv1.GossipView{}
	v.ProtoReflect().SetUnknown(raw) // marshalled as the members they encode
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_GossipView{GossipView: v}}
}

// storeMax raises v to n if n is larger.
func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// converge is the seconds from the last join to convergence, both in Unix
// nanoseconds; 0 before convergence (or if a join came after it).
func converge(lastJoin, convergedAt int64) float64 {
	if convergedAt == 0 || convergedAt < lastJoin {
		return 0
	}
	return time.Duration(convergedAt - lastJoin).Seconds()
}
