// Package fleet is a simulated fleet of agents for measuring the
// coordinator at cluster scale on one machine: N agents, each one real
// gRPC stream of the agent protocol (meshperf.agent.v1) to a real
// coordinator over loopback, that register with made-up loopback
// addresses, follow their probe plans (full, then deltas, acknowledged),
// send one ProbeReport per report period with plausible figures for every
// peer, path and kind of the plan, send gossip views as agents do at a
// join (see Config.Gossip), and answer on-demand work at once with
// plausible results, under a current agent's rules (work_id, and
// Work.timeout counted from the Work's arrival: see work.go). No agent
// sends a packet to any address: the fleet speaks only to the
// coordinator, on loopback.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/grpcbuf"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the fleet itself: its config and counters, and Run,
// which keeps every simulated agent's sessions. The rest of a simulated
// agent is cut by concern: identity.go (names, addresses, registration,
// join order), session.go (one stream: its send loop with the heartbeats,
// its receive loop and the loop that follows the plan), plan.go (the
// held plan), reports.go (probe reports and gossip views) and work.go
// (answers to on-demand work). scale.go, process.go and command.go are
// the bench-scale benchmark around it.

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
	// Work counts on-demand work answered (cancel_client gets no answer,
	// as from an agent).
	Work int64
	// SessionErrors counts sessions that ended in an error.
	SessionErrors int64
}

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
		m, err := proto.Marshal(&agentv1.GossipMember{NodeName: NodeName(i), State: measurev1.GossipState_GOSSIP_STATE_ALIVE, Address: net.JoinHostPort(hostIP(i), strconv.Itoa(protocol.DefaultGossipPort))})
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
