// Package registry owns the coordinator's live view of its agents: it runs
// each agent's session on its gRPC stream (registration, heartbeats, work
// and results), hands work to a node's agent and waits for the answer with
// the same work ID, and tells every agent which endpoints exist. It sends
// the agents ResultAcks for the client results the coordinator stored, and
// passes client results nobody waits for (late, or sent again after a
// reconnect) to a LateHandler. It also keeps the agents' gossip views
// (coordinator/membership): it gives each registering agent the gossip
// addresses of the others as seeds, reports per node what gossip says of
// it and any partition between gossip and the sessions, and marks a node
// that a quorum of the gossip reporters declares dead unavailable once its
// session is no longer live (gossip alone never takes a node with recent
// heartbeats out of the mesh); views from sessions that are not reporters
// are refused.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/membership"
	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/coordinator/protoconv"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// Errors of the registry. Match them with errors.Is.
var (
	// ErrAgentUnavailable: the node has no connected agent, or it went away
	// while work was in flight.
	ErrAgentUnavailable = errors.New("agent unavailable")
	// ErrVersionMismatch: the agent speaks another protocol version.
	ErrVersionMismatch = errors.New("protocol version mismatch")
	// ErrBadRegistration: the agent's Register message was refused; the
	// message names the field and value.
	ErrBadRegistration = errors.New("bad registration")
	// ErrHeartbeatTimeout: no message from the agent within HeartbeatTimeout.
	ErrHeartbeatTimeout = errors.New("heartbeat timeout")
	// ErrReplaced: a newer session of the same node took over.
	ErrReplaced = errors.New("session replaced by a newer one")
	// ErrShutdown: the coordinator is shutting down.
	ErrShutdown = errors.New("coordinator shutting down")
)

// Stream is the agent side of AgentService.Connect as the gRPC server sees
// it. Send is only ever called from one goroutine.
type Stream interface {
	Send(*agentv1.ConnectResponse) error
	Recv() (*agentv1.ConnectRequest, error)
}

// Recorder persists what the registry learns of agents, as
// meshperf.store.v1 records. It is coordinator/store.Store in production.
type Recorder interface {
	PutAgent(ctx context.Context, a *storev1.Agent) error
	Agents(ctx context.Context) ([]*storev1.Agent, error)
}

// Config configures New.
type Config struct {
	// Recorder persists agents; required.
	Recorder Recorder
	// Version is the coordinator's build version, sent to agents.
	Version string
	// HeartbeatInterval is how often both sides send heartbeats; zero
	// means 1 s.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a silent agent is kept; zero means
	// 10 x HeartbeatInterval (a loaded 2-CPU node running a bandwidth test
	// can delay a heartbeat by seconds).
	HeartbeatTimeout time.Duration
	// MaxHeartbeatRate bounds the heartbeats per second each side sends
	// over all sessions: a registering agent of a fleet of N known nodes
	// gets an interval of at least N / MaxHeartbeatRate seconds (at most
	// 15 s), and a timeout as many times its interval as HeartbeatTimeout
	// is of HeartbeatInterval. Zero means 500 per second: 1 s up to 500
	// nodes, 10 s at 5,000.
	MaxHeartbeatRate int
	// DepartAfter is how long a node whose agent is gone stays in meshes
	// (its tests failing as agent_unavailable); zero means 1 h.
	DepartAfter time.Duration
	// UnprovenGrace is how long a node whose agent left before it was
	// proven (unproven.go) stays known, out of default meshes; zero means
	// DefaultUnprovenGrace.
	UnprovenGrace time.Duration
	// PartitionGrace is how long the coordinator and gossip must disagree
	// on a node before it is reported as a partition; zero means
	// membership.DefaultGrace (1 min), a negative value no grace.
	PartitionGrace time.Duration
	// GossipSettle is how long after a node registers the gossip views
	// must be newer than that for their "dead" or "left" about it to count
	// (membership.Config.Settle); zero means membership.DefaultSettle, a
	// negative value none.
	GossipSettle time.Duration
	// GossipEvaluateInterval is how often at most the partitions are
	// evaluated, by one goroutine of the registry, after gossip views or
	// sessions change (and while a disagreement waits out its grace); zero
	// means 1 s.
	GossipEvaluateInterval time.Duration
	// Logger receives session events; nil means discard.
	Logger *slog.Logger
	// Addresses is the policy every registered address must pass
	// (AddressPolicy.Check must accept it). Nil means the unit tests'
	// policy: loopback and link-local allowed, any CIDR, no cluster check;
	// coordinator.Run always sets one.
	Addresses *AddressPolicy
	// ServiceIPs, if set, gives a registering node with a pod endpoint its
	// ClusterIP (coordinator/kube.Services.Ensure in a cluster: a Service
	// of that node's pod alone, on the ports of the servers its agent
	// registered), which replaces the service IP the agent announced. It
	// is called on every registration, so a new pod IP or port repoints
	// the Service; it must be idempotent and return once ctx ends. In a
	// cluster (ServiceIPs or Addresses.Cluster set) the agent's service IP
	// is never kept: a node without a pod endpoint, or whose lookup fails
	// or finds no ClusterIP, gets none (logged) until a retry gets one
	// (ServiceIPRetry). Nil, outside a cluster, means the agents' service
	// IPs are taken as they are.
	ServiceIPs ServiceIPFunc
	// ServiceIPRetry is the first wait before ServiceIPs is asked again
	// for a connected node whose registration got no ClusterIP because the
	// call failed or found none (the API server down or slow); the wait
	// doubles after each failure up to MaxServiceIPRetry, each drawn from
	// half to one and a half times it, while the session lasts. Zero means
	// DefaultServiceIPRetry.
	ServiceIPRetry time.Duration
	// ExternalTargets is the allowlist of external targets (the
	// coordinator's config file) that every Endpoints message carries to
	// the agents; each must pass protocol.ValidateExternalTarget, names
	// unique, at most protocol.MaxExternalTargets. Nil means none.
	ExternalTargets []*measurev1.ExternalTarget
	// Probes, if set, is the peer table of the continuous probe plans: a
	// registering agent that has a probe_port joins it and its session
	// follows it, sending the agent its plan in full and then in deltas;
	// such an agent gets the other nodes' addresses from its plan, not from
	// Endpoints (which then carry the external targets only), so a node
	// joining costs every other agent one small delta. Nil means no plans:
	// every agent gets the whole Endpoints list on every change.
	Probes *probeplan.Table
	// PlanDebounce is how long a session waits after a peer table change
	// before it builds its agent's delta; zero means
	// probeplan.DefaultDebounce.
	PlanDebounce time.Duration
	// PlansInFlight bounds the sessions building or sending a probe plan
	// at once, so that a join wave of thousands of agents, each owed a full
	// plan of thousands of peers, holds a bounded number of them in memory
	// (a full plan of 5,000 peers is about 1 MB built and 300 kB encoded);
	// zero means DefaultPlansInFlight.
	PlansInFlight int
	// PlanSlotHold is the longest one session holds its plan slot waiting
	// for the agent's PlanAck; then the slot is given back all the same,
	// so that a few stalled agents cannot hold up every other agent's
	// plan. Zero means DefaultPlanSlotHold.
	PlanSlotHold time.Duration
	// Reports takes the agents' probe reports; nil drops them (and
	// acknowledges nothing).
	Reports ReportSink
	// GossipReporters is how many of the connected agents that gossip send
	// their gossip views (Registered.gossip_quiet tells the others not
	// to); when a reporter leaves, a quiet agent is made one. Memberlist
	// converges to one view, so a few dozen reporters tell what all would,
	// while all 5,000 of a large cluster would upload 25 million members
	// at every start and resync. Zero means DefaultGossipReporters; a
	// negative value means every agent reports.
	GossipReporters int
}

// DefaultGossipReporters is Config.GossipReporters' default.
const DefaultGossipReporters = 32

// DefaultPlansInFlight is Config.PlansInFlight's default: 128 full plans,
// some 250 MB at 5,000 peers each (built, then encoded).
const DefaultPlansInFlight = 128

// DefaultPlanSlotHold is Config.PlanSlotHold's default.
const DefaultPlanSlotHold = 10 * time.Second

// DefaultServiceIPRetry is Config.ServiceIPRetry's default.
const DefaultServiceIPRetry = 5 * time.Second

// MaxServiceIPRetry bounds the wait between two ServiceIPs retries of a
// node: 5,000 nodes that registered while the API server was down ask at
// most about 40 times a second once it is back, under the client's rate
// limit.
const MaxServiceIPRetry = 2 * time.Minute

// Node is what the coordinator needs to know to send tests to a node.
type Node struct {
	// Name is the node name.
	Name string
	// HostIP and PodIP are the node's addresses per network; PodIP is
	// invalid if the node has no pod endpoint.
	HostIP, PodIP netip.Addr
	// ServiceIP is the ClusterIP fronting the node's pod; invalid if none.
	ServiceIP netip.Addr
	// HostIPv6, PodIPv6 and ServiceIPv6 are a dual-stack node's IPv6
	// addresses, beside IPv4 ones in HostIP, PodIP and ServiceIP; invalid
	// if none. An IPv6-only node has its IPv6 addresses in HostIP, PodIP
	// and ServiceIP, and none here: use Addr and ServiceAddr to get the
	// address of a family.
	HostIPv6, PodIPv6, ServiceIPv6 netip.Addr
	// GossipPort is the agent's gossip port on HostIP; zero if it does not
	// gossip.
	GossipPort uint16
	// ProbePort is the agent's TCP echo responder on both networks; zero
	// if it runs no probe plans (an older agent).
	ProbePort uint16
	// HTTPPort is the agent's HTTP target on both networks; zero if
	// unknown.
	HTTPPort uint16
	// Iperf3Port, QperfPort and QperfDataPort are the ports of the
	// agent's iperf3 and qperf servers on both networks, as registered
	// (the defaults, protocol.DefaultIperf3Port and so on, for 0): the
	// only ones a ServerStarted may give (CheckServerStarted).
	Iperf3Port, QperfPort, QperfDataPort uint16
	// HostMTU and PodMTU are the MTUs in bytes of the interfaces holding
	// HostIP and PodIP; zero if unknown.
	HostMTU, PodMTU uint32
}

// Registry holds the sessions of connected agents and the last known
// registration of every agent. It is safe for concurrent use.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	gossip *membership.Tracker // views of connected agents only
	// warn rate-limits, per node and message, the warnings about what an
	// agent's session sends that is refused or nobody waits for: a rogue
	// or broken agent repeating itself costs one line a minute, not one a
	// message.
	warn sanity.Limiter

	mu       sync.Mutex
	closed   bool                // set by Shutdown
	sessions map[string]*session // by node name: connected agents
	// addrs are the addresses the connected agents registered (host, pod,
	// ClusterIP), each to the sessions that registered it, so that a
	// registration checks for a conflict in O(1), not O(agents).
	addrs map[netip.Addr][]*session
	// legacy counts the connected sessions without a probe plan, which
	// take Endpoints of every node (announceEndpoints).
	legacy int
	// custom are the connected sessions whose iperf3 or qperf ports are
	// not the defaults: the Endpoints of the sessions with a probe plan
	// list them (endpoints.go).
	custom map[*session]struct{}
	// reporters counts the connected sessions that send gossip views
	// (session.reporter; Config.GossipReporters bounds it).
	reporters int
	known     map[string]*storev1.Agent // by node name: every agent ever seen, as recorded
	proven    map[string]bool           // known nodes a working agent runs (unproven.go)
	late      LateHandler               // set by HandleLate
	// registering holds per node the registrations between their
	// ServiceIPs call and their attach or refusal (registering.go).
	registering map[string]*registration
	// peers are the nodes in (or cordoned out of) the probe plans, by name,
	// as they last registered (probes.go).
	peers map[string]Node
	// evalDone is closed when the gossip evaluator (gossip.go), started
	// by the first change to evaluate, has returned; nil until then.
	evalDone chan struct{}

	evalKick chan struct{} // capacity 1: a change to evaluate is pending
	// planSlots holds a token per session building or sending a plan
	// (capacity Config.PlansInFlight).
	planSlots chan struct{}
	evalStop  chan struct{} // closed by Shutdown
}

// New loads the known agents from cfg.Recorder, all marked disconnected.
func New(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Recorder == nil {
		return nil, errors.New("registry: Config.Recorder is nil")
	}
	if cfg.GossipReporters == 0 {
		cfg.GossipReporters = DefaultGossipReporters
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = time.Second
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = 10 * cfg.HeartbeatInterval
	}
	if cfg.HeartbeatInterval < 10*time.Millisecond || cfg.HeartbeatTimeout < 2*cfg.HeartbeatInterval {
		return nil, fmt.Errorf("registry: heartbeat interval %v and timeout %v: want an interval of at least 10ms and a timeout of at least twice it",
			cfg.HeartbeatInterval, cfg.HeartbeatTimeout)
	}
	if cfg.DepartAfter == 0 {
		cfg.DepartAfter = time.Hour
	}
	if cfg.UnprovenGrace <= 0 {
		cfg.UnprovenGrace = DefaultUnprovenGrace
	}
	if cfg.PlansInFlight <= 0 {
		cfg.PlansInFlight = DefaultPlansInFlight
	}
	if cfg.PlanSlotHold <= 0 {
		cfg.PlanSlotHold = DefaultPlanSlotHold
	}
	if cfg.ServiceIPRetry <= 0 {
		cfg.ServiceIPRetry = DefaultServiceIPRetry
	}
	if cfg.MaxHeartbeatRate == 0 {
		cfg.MaxHeartbeatRate = 500
	}
	if cfg.GossipEvaluateInterval <= 0 {
		cfg.GossipEvaluateInterval = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Addresses == nil {
		cfg.Addresses = permissive
	}
	if err := cfg.Addresses.Check(); err != nil {
		return nil, fmt.Errorf("registry: address policy: %w", err)
	}
	ext, err := checkExternal(cfg.ExternalTargets)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	cfg.ExternalTargets = ext
	agents, err := cfg.Recorder.Agents(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: load agents: %w", err)
	}
	r := &Registry{cfg: cfg, log: log, sessions: map[string]*session{}, addrs: map[netip.Addr][]*session{}, custom: map[*session]struct{}{}, known: map[string]*storev1.Agent{}, proven: map[string]bool{}, peers: map[string]Node{},
		evalKick: make(chan struct{}, 1), evalStop: make(chan struct{}), planSlots: make(chan struct{}, cfg.PlansInFlight),
		gossip: membership.New(membership.Config{Grace: cfg.PartitionGrace, Settle: cfg.GossipSettle, Logger: log})}
	start := timestamppb.Now()
	for _, a := range agents {
		if a.GetConnected() {
			// Stored as connected: the previous coordinator ended (or
			// died) with this agent's session open, so it was seen until
			// then, not at its registration, which may be days old.
			a.LastSeenTime = start
		}
		r.proven[a.GetNodeName()] = provenAtLoad(a, cfg.HeartbeatTimeout)
		a.Connected = false
		r.known[a.GetNodeName()] = a
	}
	r.seedProbes()
	for _, t := range ext {
		if _, ok := r.known[t.GetName()]; ok {
			log.Warn("an external target has the name of a stored node: runs that name the target are refused until the node departs; rename the target",
				"target", t.GetName(), "node", t.GetName())
		}
	}
	return r, nil
}

// maxScaledHeartbeat caps the interval heartbeats gets from the fleet's
// size.
const maxScaledHeartbeat = 15 * time.Second

// heartbeats returns the heartbeat interval and timeout of a registering
// session: Config.HeartbeatInterval and HeartbeatTimeout, stretched so
// that the known nodes' heartbeats stay within Config.MaxHeartbeatRate.
func (r *Registry) heartbeats() *heartbeatParams {
	r.mu.Lock()
	n := len(r.known)
	r.mu.Unlock()
	interval := r.cfg.HeartbeatInterval
	if scaled := time.Duration(n) * time.Second / time.Duration(r.cfg.MaxHeartbeatRate); scaled > interval {
		interval = max(min(scaled, maxScaledHeartbeat), r.cfg.HeartbeatInterval)
	}
	return &heartbeatParams{interval: interval,
		timeout: time.Duration(float64(r.cfg.HeartbeatTimeout) * float64(interval) / float64(r.cfg.HeartbeatInterval))}
}

// SetMaintenance cordons (on) or uncordons a known node and persists it.
// The error wraps ErrUnknownNode.
func (r *Registry) SetMaintenance(ctx context.Context, name string, on bool) (*meshv1.Agent, error) {
	r.mu.Lock()
	rec, ok := r.known[name]
	var a *meshv1.Agent
	if ok {
		rec = cloneAgent(rec)
		rec.Maintenance = on
		r.known[name] = rec
		a = protoconv.APIAgent(rec)
		a.State = r.state(rec, time.Now(), membership.StateGone(r.gossip.State(name)))
	}
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("node %q: %w", name, ErrUnknownNode)
	}
	r.storeRecord(ctx, name, nil)
	r.SyncProbes()
	r.log.Info("node maintenance", "node", name, "maintenance", on)
	return a, nil
}

// Ready returns the nodes with a connected agent, sorted by name.
func (r *Registry) Ready() []Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Node, 0, len(r.sessions))
	for _, s := range r.sessions {
		out = append(out, s.node)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Node returns a connected node by name.
func (r *Registry) Node(name string) (Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[name]
	if !ok {
		return Node{}, false
	}
	return s.node, true
}

// Dispatch sends w to node's agent and waits for the WorkResult with the
// same work ID and action. It fails with ErrAgentUnavailable (wrapped) if
// the node has no session or the session ends first, and with ctx's error if
// ctx ends first.
func (r *Registry) Dispatch(ctx context.Context, node string, w *agentv1.Work) (*agentv1.WorkResult, error) {
	kind, err := workKind(w)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	s, ok := r.sessions[node]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("node %q: %w: not connected", node, ErrAgentUnavailable)
	}
	return s.call(ctx, pendingKey{workID: protocol.WorkID(w), kind: kind}, w)
}

// Send queues w for node's agent without waiting for an answer: for work
// that gets none (cancel_client). It fails with ErrAgentUnavailable
// (wrapped) if the node has no session or it ends first, with ctx's error
// if ctx ends before the work is queued, and refuses work that is
// answered (use Dispatch).
func (r *Registry) Send(ctx context.Context, node string, w *agentv1.Work) error {
	if _, ok := w.GetAction().(*agentv1.Work_CancelClient); !ok {
		return fmt.Errorf("node %q: work %q: only cancel_client is sent without waiting for an answer", node, protocol.WorkID(w))
	}
	r.mu.Lock()
	s, ok := r.sessions[node]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("node %q: %w: not connected", node, ErrAgentUnavailable)
	}
	select {
	case s.out <- w:
		return nil
	case <-s.done:
		return s.goneErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attach makes s the node's session, ending an older one. It fails with
// ErrShutdown after Shutdown.
func (r *Registry) attach(ctx context.Context, s *session, reg *agentv1.Register) error {
	now := timestamppb.Now()
	a := &storev1.Agent{
		NodeName: reg.GetNodeName(), Connected: true, AgentVersion: reg.GetAgentVersion(),
		Addresses: protoconv.Clones(reg.GetAddresses()), Tools: protoconv.Clones(reg.GetTools()),
		ConnectTime: now, LastSeenTime: now,
		ProbePort: uint32(s.node.ProbePort), HttpPort: uint32(s.node.HTTPPort),
		Iperf3Port: uint32(s.node.Iperf3Port), QperfPort: uint32(s.node.QperfPort), QperfDataPort: uint32(s.node.QperfDataPort),
	}
	if s.node.ServiceIP.IsValid() { // the agent's, or the ClusterIP Config.ServiceIPs gave
		a.ServiceIp = s.node.ServiceIP.String()
	}
	if s.node.ServiceIPv6.IsValid() {
		a.ServiceIpv6 = s.node.ServiceIPv6.String()
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrShutdown
	}
	if err := r.conflictsLocked(s.node); err != nil { // another registration took an address since checkConflicts
		r.mu.Unlock()
		return err
	}
	if prev := r.known[s.node.Name]; prev != nil {
		a.Maintenance = prev.GetMaintenance() // a cordon outlives reconnects
	}
	old := r.sessions[s.node.Name]
	if old != nil {
		r.unindexLocked(old)
	}
	r.sessions[s.node.Name] = s
	s.attachedAt = now.AsTime()
	r.indexLocked(s)
	if s.node.GossipPort != 0 && (r.cfg.GossipReporters < 0 || r.reporters < r.cfg.GossipReporters) {
		s.reporter = true
		r.reporters++
	}
	r.promoteLocked() // a replaced reporter whose new session does not gossip left a slot
	r.known[s.node.Name] = a
	r.mu.Unlock()
	r.storeRecord(ctx, s.node.Name, r.joinIfConnected(s.node))
	// Gossip that predates this session (a restarted agent left the pool
	// and is rejoining) says nothing about it.
	r.gossip.Joined(s.node.Name)
	r.kickGossip()
	if old != nil {
		old.end(ErrReplaced)
	}
	r.announceEndpoints(s.node)
	return nil
}

// detach removes s if it is still the node's session.
func (r *Registry) detach(ctx context.Context, s *session) {
	r.mu.Lock()
	current := r.sessions[s.node.Name] == s
	if current {
		delete(r.sessions, s.node.Name)
		r.unindexLocked(s)
		r.promoteLocked()
		if a := r.known[s.node.Name]; a != nil {
			a = cloneAgent(a)
			a.Connected = false
			a.LastSeenTime = timestamppb.New(s.lastSeen())
			r.known[s.node.Name] = a
		}
	}
	r.mu.Unlock()
	if current {
		r.storeRecord(ctx, s.node.Name, nil)
		r.leftUnproven(s.node.Name)
		r.gossip.Drop(s.node.Name)
		r.kickGossip()
		r.announceEndpoints(s.node)
	}
}
