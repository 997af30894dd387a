package gossip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// State is a member's state as this agent's memberlist last saw it: the
// protocol's GossipState (which the agent reports to the coordinator as
// is), one of the four below.
type State = measurev1.GossipState

// The states of a member.
const (
	// StateAlive: the member answers probes.
	StateAlive = measurev1.GossipState_GOSSIP_STATE_ALIVE
	// StateSuspect: the member missed probes; it is dead unless it
	// refutes the suspicion in time.
	StateSuspect = measurev1.GossipState_GOSSIP_STATE_SUSPECT
	// StateDead: the pool declared the member dead.
	StateDead = measurev1.GossipState_GOSSIP_STATE_DEAD
	// StateLeft: the member left the pool on purpose.
	StateLeft = measurev1.GossipState_GOSSIP_STATE_LEFT
)

// Member is one member of the pool.
type Member struct {
	// Name is the member's node name.
	Name string
	// Addr is the member's gossip address.
	Addr netip.AddrPort
	// State is the member's last known state.
	State State
}

// Config configures New. Zero durations mean memberlist's LAN defaults.
type Config struct {
	// NodeName is this member's name: the Kubernetes node name; required.
	NodeName string
	// BindAddr is the address memberlist binds and advertises (the node's
	// host IP); required unless Transport is set.
	BindAddr netip.Addr
	// BindPort is the UDP and TCP port; zero means any free port (the
	// agent itself never passes zero: its --gossip-port 0 turns gossip
	// off).
	BindPort int
	// Transport replaces memberlist's UDP and TCP transport; nil means the
	// real network. Tests pass one from memberlist.MockNetwork.
	Transport memberlist.NodeAwareTransport
	// ProbeInterval is how often a random member is probed; zero means 1 s.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for its ack; zero means
	// 500 ms.
	ProbeTimeout time.Duration
	// GossipInterval is how often state changes are gossiped; zero means
	// 200 ms.
	GossipInterval time.Duration
	// SuspicionMult scales how long a suspect has to refute the suspicion
	// (in probe intervals, times log10 of the pool size); zero means 4.
	SuspicionMult int
	// ReconnectInterval is how often the member tries to join again one
	// member it holds dead (not left), so that the two sides of a healed
	// partition merge again (memberlist alone never probes the dead), and,
	// while it knows no other member alive, the last Join's seeds again
	// (a join refused by admission: a seed not yet holding this node's
	// registration); zero means 30 s, a negative value never.
	ReconnectInterval time.Duration
	// LeaveTimeout bounds the wait for the leave message to go out in
	// Close; zero means 2 s.
	LeaveTimeout time.Duration
	// GossipToTheDead is how long memberlist goes on gossiping to a
	// member after declaring it dead, during which a healed partition
	// merges back without the reconnect loop (ReconnectInterval); zero
	// means memberlist's default, 30 s. Tests shorten it to leave the
	// merge to the reconnect loop alone.
	GossipToTheDead time.Duration
	// KeyFile, if set, is the gossip key file (ParseKeys): memberlist then
	// encrypts every message with its first key, and takes only messages
	// that one of its keys decrypts. The file is read again every
	// KeyCheckInterval, and a change of its keys takes effect at once
	// (rotation: add the new key everywhere, then make it the first, then
	// remove the old one). Empty means plaintext gossip.
	KeyFile string
	// KeyCheckInterval is how often KeyFile is read again; zero means
	// DefaultKeyCheckInterval, a negative value never.
	KeyCheckInterval time.Duration
	// AllowLoopback admits members at loopback addresses; they are
	// admitted anyway when this member's own address is loopback (a test
	// or lab on one machine). Link-local members are admitted only when
	// its own address is link-local. Unspecified, multicast and cloud
	// metadata addresses (169.254.169.254, fd00:ec2::254,
	// 100.100.100.200) are never admitted (see also Gossip.SetRegistered).
	AllowLoopback bool
	// Logger receives memberlist's own logs and the pool's changes; nil
	// means discard.
	Logger *slog.Logger
}

// ErrClosed is returned by Join after Close.
var ErrClosed = errors.New("gossip closed")

// Gossip is this agent's membership. It is safe for concurrent use.
type Gossip struct {
	cfg    Config
	log    *slog.Logger
	ml     *memberlist.Memberlist
	events *events
	meta   *delegate
	admit  *admission

	joins     sync.WaitGroup // Join calls in flight and the reconnect loop
	seedsMu   sync.Mutex
	seeds     []string // the last Join's seeds, for reconnectLoop
	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// New starts memberlist with this node alone in its pool; Join adds the
// others. It fails if memberlist cannot bind its port.
func New(cfg Config) (*Gossip, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("gossip: Config.NodeName is empty")
	}
	if cfg.Transport == nil && !cfg.BindAddr.IsValid() {
		return nil, errors.New("gossip: Config.BindAddr is not set")
	}
	if cfg.BindPort < 0 || cfg.BindPort > 65535 {
		return nil, fmt.Errorf("gossip: port %d is not a port", cfg.BindPort)
	}
	if cfg.ReconnectInterval == 0 {
		cfg.ReconnectInterval = 30 * time.Second
	}
	if cfg.LeaveTimeout == 0 {
		cfg.LeaveTimeout = 2 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	ev := newEvents(lg)
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	if cfg.BindAddr.IsValid() {
		mc.BindAddr = cfg.BindAddr.String()
	}
	mc.BindPort, mc.AdvertisePort = cfg.BindPort, cfg.BindPort
	if cfg.Transport != nil {
		mc.Transport = cfg.Transport
	}
	if cfg.ProbeInterval > 0 {
		mc.ProbeInterval = cfg.ProbeInterval
	}
	if cfg.ProbeTimeout > 0 {
		mc.ProbeTimeout = cfg.ProbeTimeout
	}
	if cfg.GossipInterval > 0 {
		mc.GossipInterval = cfg.GossipInterval
	}
	if cfg.SuspicionMult > 0 {
		mc.SuspicionMult = cfg.SuspicionMult
	}
	if cfg.GossipToTheDead > 0 {
		mc.GossipToTheDeadTime = cfg.GossipToTheDead
	}
	var keyring *memberlist.Keyring
	var keyFile []byte
	if cfg.KeyFile != "" {
		var err error
		if keyFile, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("gossip: %w %s: %w", ErrKeyFile, cfg.KeyFile, err)
		}
		keys, err := ParseKeys(cfg.KeyFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("gossip: %w", err)
		}
		if keyring, err = newKeyring(keys); err != nil {
			return nil, fmt.Errorf("gossip: %w %s: %w", ErrKeyFile, cfg.KeyFile, err)
		}
		mc.Keyring = keyring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
		if cfg.KeyCheckInterval == 0 {
			cfg.KeyCheckInterval = DefaultKeyCheckInterval
		}
	}
	own := cfg.BindAddr
	if cfg.Transport != nil {
		if ip, _, err := cfg.Transport.FinalAdvertiseAddr("", cfg.BindPort); err == nil {
			own, _ = netip.AddrFromSlice(ip)
		}
	}
	own = own.Unmap()
	adm := &admission{self: cfg.NodeName, loopback: cfg.AllowLoopback || own.IsLoopback(), linkLocal: own.IsLinkLocalUnicast(), log: lg}
	meta := &delegate{}
	mc.Events, mc.Delegate, mc.Alive, mc.Merge = ev, meta, adm, adm
	mc.Logger = log.New(&logWriter{log: lg}, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: start memberlist as %q on %s: %w", cfg.NodeName, netip.AddrPortFrom(cfg.BindAddr, uint16(cfg.BindPort)), err)
	}
	g := &Gossip{cfg: cfg, log: lg, ml: ml, events: ev, meta: meta, admit: adm, closed: make(chan struct{})}
	if keyring != nil && cfg.KeyCheckInterval > 0 {
		g.joins.Add(1)
		go func() { // owner: Gossip; ends when Close (or kill) closes g.closed
			defer g.joins.Done()
			g.watchKeys(keyring, keyFile)
		}()
	}
	if cfg.ReconnectInterval > 0 {
		g.joins.Add(1)
		go func() { // owner: Gossip; ends when Close (or kill) closes g.closed
			defer g.joins.Done()
			g.reconnectLoop()
		}()
	}
	return g, nil
}

// every calls fn every d until g is closed (then returns); fn runs in the
// caller's goroutine, one call at a time.
func (g *Gossip) every(d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-g.closed:
			return
		case <-tick.C:
		}
		fn()
	}
}

// reconnectLoop tries, every ReconnectInterval, to join one member held
// dead, chosen at random, until g is closed.
func (g *Gossip) reconnectLoop() {
	g.every(g.cfg.ReconnectInterval, func() {
		var dead []Member
		others := false
		for _, m := range g.events.snapshot() {
			// A member admitted before the registered nodes were known
			// (or since departed) is not dialled again.
			if m.State == StateDead && m.Name != g.cfg.NodeName && m.Addr.IsValid() && g.admit.admitAt(m.Name, m.Addr) == nil {
				dead = append(dead, m)
			}
			others = others || (m.Name != g.cfg.NodeName && m.State == StateAlive)
		}
		if len(dead) == 0 {
			g.seedsMu.Lock()
			seeds := g.seeds
			g.seedsMu.Unlock()
			if !others && len(seeds) > 0 {
				// Alone: the join may have been refused (a seed that did
				// not know this node's registration yet, or the other way
				// round); try the seeds again.
				if n, err := g.ml.Join(seeds); err == nil && n > 0 {
					g.log.Info("joined the seeds again", "seeds", seeds)
				}
			}
			return
		}
		m := dead[rand.IntN(len(dead))]
		if _, err := g.ml.Join([]string{m.Addr.String()}); err != nil {
			g.log.Debug("rejoin a dead member", "member", m.Name, "addr", m.Addr, "err", err)
			return
		}
		g.log.Info("rejoined a member held dead", "member", m.Name, "addr", m.Addr)
	})
}

// Addr is the address this member advertises to the pool: what other
// members join.
func (g *Gossip) Addr() netip.AddrPort {
	n := g.ml.LocalNode()
	ip, _ := netip.AddrFromSlice(n.Addr)
	return netip.AddrPortFrom(ip.Unmap(), n.Port)
}

// Join contacts seeds ("ip:port" each) and merges their view of the pool.
// It returns how many seeds answered; the error is nil if one did. When
// ctx ends first, Join returns ctx's error at once, and the contact goes
// on in the background (bounded by memberlist's TCP timeout, 10 s).
func (g *Gossip) Join(ctx context.Context, seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, nil
	}
	select {
	case <-g.closed:
		return 0, ErrClosed
	default:
	}
	type result struct {
		n   int
		err error
	}
	g.seedsMu.Lock()
	g.seeds = slices.Clone(seeds)
	g.seedsMu.Unlock()
	done := make(chan result, 1)
	g.joins.Add(1)
	go func() { // owner: Gossip (Close waits); bounded by memberlist's TCP timeout per seed
		defer g.joins.Done()
		n, err := g.ml.Join(seeds)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && r.n == 0 {
			return 0, fmt.Errorf("gossip: join %s: %w", strings.Join(seeds, ", "), r.err)
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Members returns every member this agent heard of, itself included,
// sorted by name, with its last known state. Dead and left members stay
// until they come back.
func (g *Gossip) Members() []Member {
	ms := g.events.snapshot()
	for _, n := range g.ml.Members() { // alive and suspect only
		if n.State != memberlist.StateSuspect {
			continue
		}
		if i := slices.IndexFunc(ms, func(m Member) bool { return m.Name == n.Name }); i >= 0 && ms[i].State == StateAlive {
			ms[i].State = StateSuspect
		}
	}
	return ms
}

// Changes returns a channel that receives a value after the set of
// members or their states changed (a suspicion excepted: poll Members for
// those). Signals coalesce: one value may stand for many changes. The
// channel is never closed.
func (g *Gossip) Changes() <-chan struct{} { return g.events.changed }

// Close leaves the pool, then stops memberlist and waits for the Join
// calls still in flight. To leave, it announces the leave in its metadata
// (so that the others record it as left, not dead), then sends the leave
// message, waiting at most Config.LeaveTimeout for each to go out. It may
// be called more than once.
func (g *Gossip) Close() error {
	g.closeOnce.Do(func() {
		close(g.closed)
		var errs []error
		g.meta.leaving.Store(true)
		if err := g.ml.UpdateNode(g.cfg.LeaveTimeout); err != nil {
			errs = append(errs, fmt.Errorf("gossip: announce the leave: %w", err))
		}
		if err := g.ml.Leave(g.cfg.LeaveTimeout); err != nil {
			errs = append(errs, fmt.Errorf("gossip: leave: %w", err))
		}
		if err := g.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("gossip: shut down: %w", err))
		}
		g.joins.Wait()
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

// kill stops memberlist without leaving, as a crash would; tests only.
func (g *Gossip) kill() {
	g.closeOnce.Do(func() {
		close(g.closed)
		_ = g.ml.Shutdown()
		g.joins.Wait()
	})
}
