package gossip_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/agent/gossip"
	"github.com/meshperf/meshperf/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fast is a configuration that detects failures within a second or so on
// the in-memory transport.
func fast(name string, tr memberlist.NodeAwareTransport, log *slog.Logger) gossip.Config {
	return gossip.Config{
		NodeName: name, Transport: tr, ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond,
		GossipInterval: 20 * time.Millisecond, SuspicionMult: 2, ReconnectInterval: 200 * time.Millisecond, LeaveTimeout: time.Second, Logger: log,
	}
}

// cutTransport wraps a MockTransport so that a test can cut a member off
// (everything to and from it dropped) before it crashes: the mock's
// channels are unbuffered, and a crashed member no longer reads them.
type cutTransport struct {
	*memberlist.MockTransport
	down    atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn
	stop    chan struct{}
	done    chan struct{}
}

func newCutTransport(n *memberlist.MockNetwork, name string) *cutTransport {
	t := &cutTransport{
		MockTransport: n.NewTransport(name), packets: make(chan *memberlist.Packet), streams: make(chan net.Conn),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go t.forward() // owner: the test (close ends it)
	return t
}

// forward takes every packet and stream at once and queues it for the
// member: the mock's channels are unbuffered, and two members answering
// each other's pings from their packet loops would otherwise deadlock.
// While the member is cut off, it drops everything.
func (t *cutTransport) forward() {
	defer close(t.done)
	var packets []*memberlist.Packet
	var streams []net.Conn
	defer func() {
		for _, c := range streams {
			_ = c.Close()
		}
	}()
	for {
		var pout chan<- *memberlist.Packet
		var p *memberlist.Packet
		if len(packets) > 0 {
			pout, p = t.packets, packets[0]
		}
		var sout chan<- net.Conn
		var c net.Conn
		if len(streams) > 0 {
			sout, c = t.streams, streams[0]
		}
		select {
		case p := <-t.MockTransport.PacketCh():
			if !t.down.Load() {
				packets = append(packets, p)
			}
		case c := <-t.MockTransport.StreamCh():
			if t.down.Load() {
				_ = c.Close()
				continue
			}
			streams = append(streams, c)
		case pout <- p:
			packets = packets[1:]
		case sout <- c:
			streams = streams[1:]
		case <-t.stop:
			return
		}
	}
}

func (t *cutTransport) close() {
	close(t.stop)
	<-t.done
}

func (t *cutTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *cutTransport) StreamCh() <-chan net.Conn           { return t.streams }

func (t *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *cutTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.down.Load() {
		return time.Now(), nil // lost on the way
	}
	return t.MockTransport.WriteToAddress(b, a)
}

func (t *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *cutTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.down.Load() {
		return nil, fmt.Errorf("cut off: no route to %s", a)
	}
	return t.MockTransport.DialAddressTimeout(a, timeout)
}

// pool is n members on one in-memory network, all joined to the first.
type pool struct {
	members []*gossip.Gossip
	trs     []*cutTransport
}

// newPool starts n members with the fast config, each changed by opts,
// and joins them to the first; they close when the test ends.
func newPool(t *testing.T, ctx context.Context, n int, opts ...func(*gossip.Config)) *pool {
	t.Helper()
	var network memberlist.MockNetwork
	p := &pool{}
	for i := range n { // every transport first: the mock network is not safe for concurrent use
		p.trs = append(p.trs, newCutTransport(&network, fmt.Sprintf("node-%d", i+1)))
	}
	t.Cleanup(func() {
		for _, tr := range p.trs { // nobody is left to read: drop everything
			tr.down.Store(true)
		}
		for _, g := range p.members {
			_ = g.Close()
		}
		for _, tr := range p.trs {
			tr.close()
		}
	})
	for i, tr := range p.trs {
		cfg := fast(fmt.Sprintf("node-%d", i+1), tr, testutil.Logger(t))
		for _, o := range opts {
			o(&cfg)
		}
		g, err := gossip.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.members = append(p.members, g)
	}
	seed := []string{p.members[0].Addr().String()}
	for _, g := range p.members[1:] {
		if n, err := g.Join(ctx, seed); err != nil || n != 1 {
			t.Fatalf("join %v: %d answered, %v", seed, n, err)
		}
	}
	return p
}

// states maps member names to states as g sees them.
func states(g *gossip.Gossip) map[string]gossip.State {
	m := map[string]gossip.State{}
	for _, mb := range g.Members() {
		m[mb.Name] = mb.State
	}
	return m
}

func allAlive(g *gossip.Gossip, n int) bool {
	s := states(g)
	if len(s) != n {
		return false
	}
	for _, st := range s {
		if st != gossip.StateAlive {
			return false
		}
	}
	return true
}

func TestMembersConvergeAlive(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := newPool(t, ctx, n)
			for _, g := range p.members {
				testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "every member alive in "+g.Addr().String()+"'s view", func() bool { return allAlive(g, n) })
			}
			for i, g := range p.members {
				for _, m := range g.Members() {
					if !m.Addr.IsValid() || !strings.HasPrefix(m.Name, "node-") {
						t.Errorf("member %d sees %+v: want a node name and an address", i+1, m)
					}
				}
			}
		})
	}
}

func TestDepartures(t *testing.T) {
	for _, tt := range []struct {
		name  string
		leave func(p *pool, victim int)
		want  gossip.State
	}{
		{"crash without leaving is dead", func(p *pool, v int) { p.trs[v].down.Store(true); p.members[v].Kill() }, gossip.StateDead},
		{"close leaves", func(p *pool, v int) { _ = p.members[v].Close() }, gossip.StateLeft},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n, victim = 4, 2
			p := newPool(t, ctx, n)
			for _, g := range p.members {
				testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "convergence", func() bool { return allAlive(g, n) })
			}
			for _, g := range p.members { // drain: a later signal is the departure's
				select {
				case <-g.Changes():
				default:
				}
			}
			tt.leave(p, victim)
			name := fmt.Sprintf("node-%d", victim+1)
			for i, g := range p.members {
				if i == victim {
					continue
				}
				// Others may be falsely suspected meanwhile on a loaded
				// machine; they refute it: wait for the end state.
				testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, name+" "+tt.want.String()+" and the others alive for node-"+fmt.Sprint(i+1), func() bool {
					s := states(g)
					for other, st := range s {
						if other != name && st != gossip.StateAlive {
							return false
						}
					}
					return len(s) == n && s[name] == tt.want
				})
				select {
				case <-g.Changes():
				default:
					t.Errorf("node-%d: no change signalled after %s became %v", i+1, name, tt.want)
				}
			}
		})
	}
}

// TestHealedPartitionMerges cuts a member off until the others declare it
// dead (and it them), then lets its traffic through again: the pool merges
// back, every member alive for every other. memberlist stops gossiping to
// the dead at once here, so only the reconnect loop can merge it.
func TestHealedPartitionMerges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, cut = 3, 2
	p := newPool(t, ctx, n, func(c *gossip.Config) { c.GossipToTheDead = time.Millisecond })
	for _, g := range p.members {
		testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "convergence", func() bool { return allAlive(g, n) })
	}
	p.trs[cut].down.Store(true)
	testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "node-3 dead for node-1 and node-2, and they for node-3", func() bool {
		return states(p.members[0])["node-3"] == gossip.StateDead && states(p.members[1])["node-3"] == gossip.StateDead &&
			states(p.members[cut])["node-1"] == gossip.StateDead && states(p.members[cut])["node-2"] == gossip.StateDead
	})
	p.trs[cut].down.Store(false)
	for i, g := range p.members {
		testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, fmt.Sprintf("every member alive again for node-%d", i+1), func() bool { return allAlive(g, n) })
	}
}

// TestLoopback runs two members on the real transport, on loopback.
func TestLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lo := netip.MustParseAddr("127.0.0.1")
	var gs []*gossip.Gossip
	for _, name := range []string{"node-a", "node-b"} {
		g, err := gossip.New(gossip.Config{NodeName: name, BindAddr: lo, Logger: testutil.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = g.Close() }()
		gs = append(gs, g)
	}
	if got := gs[0].Addr(); got.Addr() != lo || got.Port() == 0 {
		t.Fatalf("Addr() = %v; want 127.0.0.1 and the port bound", got)
	}
	if n, err := gs[1].Join(ctx, []string{gs[0].Addr().String()}); err != nil || n != 1 {
		t.Fatalf("join: %d, %v", n, err)
	}
	for _, g := range gs {
		testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "both alive", func() bool { return allAlive(g, 2) })
	}
}

func TestJoinFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var network memberlist.MockNetwork
	g, err := gossip.New(fast("node-1", network.NewTransport("node-1"), testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := g.Join(ctx, []string{"127.0.0.1:999"}); err == nil || n != 0 {
		t.Errorf("join of a seed nobody serves: %d, %v; want an error", n, err)
	}
	if n, err := g.Join(ctx, nil); err != nil || n != 0 {
		t.Errorf("join of no seeds: %d, %v; want 0, nil", n, err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("close alone: %v", err)
	}
	if _, err := g.Join(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Error("join after close: no error")
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  gossip.Config
		want string
	}{
		{"no name", gossip.Config{BindAddr: netip.MustParseAddr("127.0.0.1")}, "NodeName"},
		{"no address", gossip.Config{NodeName: "n"}, "BindAddr"},
		{"bad port", gossip.Config{NodeName: "n", BindAddr: netip.MustParseAddr("127.0.0.1"), BindPort: 70000}, "not a port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := gossip.New(tt.cfg)
			if err == nil {
				_ = g.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestParseLogLine(t *testing.T) {
	for _, tt := range []struct {
		line      string
		wantLevel slog.Level
		wantMsg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=1.2.3.4:5", slog.LevelDebug, "Stream connection from=1.2.3.4:5"},
		{"[WARN] memberlist: Was able to connect to node-2 over TCP but UDP probes failed", slog.LevelWarn, "Was able to connect to node-2 over TCP but UDP probes failed"},
		{"[ERR] memberlist: Failed to send ping: boom", slog.LevelError, "Failed to send ping: boom"},
		{"[ERROR] memberlist: x", slog.LevelError, "x"},
		{"[INFO] memberlist: Marking node-3 as failed", slog.LevelInfo, "Marking node-3 as failed"},
		{"no level at all", slog.LevelInfo, "no level at all"},
		{"[odd", slog.LevelInfo, "[odd"},
		{"", slog.LevelInfo, ""},
	} {
		gotLevel, gotMsg := gossip.ParseLogLine(tt.line)
		if gotLevel != tt.wantLevel || gotMsg != tt.wantMsg {
			t.Errorf("parseLogLine(%q) = %v, %q; want %v, %q", tt.line, gotLevel, gotMsg, tt.wantLevel, tt.wantMsg)
		}
	}
}
