package probe

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Network is one network the agent probes from.
type Network struct {
	// Net is NETWORK_HOST or NETWORK_POD.
	Net measurev1.Network
	// NetNS is the path of the network namespace the probes' sockets are
	// created in (/proc/PID/ns/net, /run/netns/NAME); "" is the agent's
	// own namespace.
	NetNS string
	// IP is the source address of the probes; the zero Addr lets the
	// kernel pick it.
	IP netip.Addr
	// IPv6 is the network's IPv6 source address; the zero Addr means the
	// network has none, and no IPv6 probe goes out from it.
	IPv6 netip.Addr
	// MTU is the MTU in bytes of the network's interface; 0 (unknown)
	// means no PROBE_KIND_ICMP_MTU probe from this network.
	MTU int
}

// Config configures a Prober.
type Config struct {
	// Node is the agent's node name (a DNS-1123 subdomain); it seeds the
	// probes' phases and the subset hashing, and a plan may not list it as
	// a peer.
	Node string
	// Host is the host network; Host.Net must be NETWORK_HOST.
	Host Network
	// Pod is the pod network, or nil when the node has none (pod paths are
	// then not probed); Pod.Net must be NETWORK_POD.
	Pod *Network
	// Logger receives the prober's logs; nil discards them.
	Logger *slog.Logger
	// Report receives each report period's ProbeReport. It is called from
	// the prober's scheduler goroutine and must not block long (probe
	// results queue up meanwhile); it owns the report it is given. A
	// report's plan_version is the plan held when the period ended; its
	// summaries are sorted by node, path and kind, one per series probed
	// in the period (a period in which nothing was due sends no report).
	Report func(*agentv1.ProbeReport)
	// NextSeq returns the next report sequence number (the agent persists
	// it); nil numbers the reports 1, 2, ... from this Prober.
	NextSeq func() uint64
	// Now is the wall clock that aligns phases and periods and stamps
	// reports; nil is time.Now. Round trips are always measured with the
	// monotonic clock, never with Now.
	Now func() time.Time
	// AllowLoopback accepts loopback peer addresses (tests on one machine);
	// a production plan naming 127.0.0.0/8 or ::1 is refused without it.
	AllowLoopback bool
}

// ErrBaseVersion is returned (wrapped) by Apply for a delta plan whose
// base_version is not the version the Prober holds; the coordinator must
// send a full plan.
var ErrBaseVersion = errors.New("delta plan does not apply to the held plan version")

// Prober probes a plan's peers; see the package comment. Apply may be
// called from any goroutine, Run once at a time.
type Prober struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	nextSeq func() uint64

	mu      sync.Mutex
	plan    *plan // immutable once held; nil before the first Apply
	running bool

	changed chan struct{} // capacity 1: a new plan is held
}

// New checks cfg and returns a Prober that holds no plan (it probes
// nothing until Apply gives it one). It errors when cfg.Node is not a
// valid node name, a network has the wrong Net, Host.IP or Pod.IP is set
// but not a usable IP address, an MTU is neither 0 nor 576..65535, or
// Report is nil.
func New(cfg Config) (*Prober, error) {
	if err := protocol.ValidateNodeName(cfg.Node); err != nil {
		return nil, fmt.Errorf("probe config: %w", err)
	}
	if cfg.Report == nil {
		return nil, errors.New("probe config: Report is nil")
	}
	if err := checkNetwork(cfg.Host, measurev1.Network_NETWORK_HOST); err != nil {
		return nil, fmt.Errorf("probe config: Host: %w", err)
	}
	if cfg.Pod != nil {
		if err := checkNetwork(*cfg.Pod, measurev1.Network_NETWORK_POD); err != nil {
			return nil, fmt.Errorf("probe config: Pod: %w", err)
		}
	}
	p := &Prober{cfg: cfg, log: cfg.Logger, now: cfg.Now, nextSeq: cfg.NextSeq, changed: make(chan struct{}, 1)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.nextSeq == nil {
		var mu sync.Mutex
		var seq uint64
		p.nextSeq = func() uint64 {
			mu.Lock()
			defer mu.Unlock()
			seq++
			return seq
		}
	}
	return p, nil
}

func checkNetwork(n Network, want measurev1.Network) error {
	if n.Net != want {
		return fmt.Errorf("Net is %v, want %v", n.Net, want) //nolint:staticcheck // ST1005: Net is the field's name
	}
	if n.IP.IsValid() && (n.IP.IsUnspecified() || n.IP.IsMulticast() || n.IP.Zone() != "" || n.IP.Is4In6()) {
		return fmt.Errorf("IP %s is not a usable source address", n.IP)
	}
	if n.IPv6.IsValid() && (n.IPv6.Is4() || n.IPv6.Is4In6() || n.IPv6.IsUnspecified() || n.IPv6.IsMulticast() || n.IPv6.Zone() != "") {
		return fmt.Errorf("IPv6 %s is not a usable IPv6 source address", n.IPv6)
	}
	if n.MTU != 0 && (n.MTU < protocol.MinMTUBytes || n.MTU > protocol.MaxMTUBytes+1) {
		return fmt.Errorf("MTU %d is neither 0 nor %d..%d", n.MTU, protocol.MinMTUBytes, protocol.MaxMTUBytes+1)
	}
	return nil
}

// Version returns the plan version the Prober holds (0 before any plan).
func (p *Prober) Version() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plan == nil {
		return 0
	}
	return p.plan.version
}

// held returns the plan held now (nil: none).
func (p *Prober) held() *plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plan
}
