package gossip_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/meshperf/meshperf/agent/gossip"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// TestAdmit: members at loopback (unless this member's own address is),
// link-local, unspecified, multicast and cloud metadata addresses are
// refused; once the registered nodes are known, so are members that are
// none of them or not at their registered gossip address.
func TestAdmit(t *testing.T) {
	ap := netip.MustParseAddrPort
	reg := map[string]netip.AddrPort{"node-2": ap("10.0.0.2:7946"), "node-3": ap("10.0.0.3:0")}
	for _, tt := range []struct {
		name       string
		loopback   bool
		registered map[string]netip.AddrPort
		member     string
		addr       netip.AddrPort
		ok         bool
	}{
		{"unicast, no registered set", false, nil, "x", ap("10.0.0.9:7946"), true},
		{"loopback", false, nil, "x", ap("127.0.0.1:7946"), false},
		{"loopback, own address loopback", true, nil, "x", ap("127.0.0.1:7946"), true},
		{"IPv6 loopback", false, nil, "x", ap("[::1]:7946"), false},
		{"IPv4-mapped loopback", false, nil, "x", ap("[::ffff:127.0.0.1]:7946"), false},
		{"link-local", false, nil, "x", ap("169.254.1.1:7946"), false},
		{"IPv6 link-local", false, nil, "x", ap("[fe80::1]:7946"), false},
		{"unspecified", true, nil, "x", ap("0.0.0.0:7946"), false},
		{"multicast", true, nil, "x", ap("224.0.0.1:7946"), false},
		{"AWS metadata", true, nil, "x", ap("169.254.169.254:80"), false},
		{"AWS IPv6 metadata", true, nil, "x", ap("[fd00:ec2::254]:80"), false},
		{"Alibaba metadata", true, nil, "x", ap("100.100.100.200:80"), false},
		{"metadata, registered there", true, map[string]netip.AddrPort{"x": ap("169.254.169.254:80")}, "x", ap("169.254.169.254:80"), false},
		{"registered at its address", false, reg, "node-2", ap("10.0.0.2:7946"), true},
		{"registered, any port", false, reg, "node-3", ap("10.0.0.3:9999"), true},
		{"unregistered name", false, reg, "ghost", ap("10.0.0.2:7946"), false},
		{"registered, another address", false, reg, "node-2", ap("10.0.0.3:7946"), false},
		{"registered, another port", false, reg, "node-2", ap("10.0.0.2:22"), false},
		{"empty registered set", false, map[string]netip.AddrPort{}, "node-2", ap("10.0.0.2:7946"), false},
		{"itself, unregistered", false, reg, "node-1", ap("10.0.0.1:7946"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := gossip.Admit("node-1", tt.loopback, tt.registered, tt.member, tt.addr)
			if (err == nil) != tt.ok {
				t.Errorf("admit %s at %s: %v; want admitted %v", tt.member, tt.addr, err, tt.ok)
			}
			if err != nil && !errors.Is(err, gossip.ErrRefusedMember) {
				t.Errorf("refusal %v does not wrap ErrRefusedMember", err)
			}
		})
	}
}

// rawMember is a memberlist without meshperf's admission, on 127.0.0.1:
// a member that forges or spreads what others announce.
func rawMember(t *testing.T, name string) *memberlist.Memberlist {
	t.Helper()
	c := memberlist.DefaultLANConfig()
	c.Name, c.BindAddr = name, "127.0.0.1"
	c.BindPort = int(testnet.FreePort(t))
	c.AdvertisePort = c.BindPort
	c.Logger = log.New(io.Discard, "", 0)
	m, err := memberlist.Create(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func addrOf(m *memberlist.Memberlist) netip.AddrPort {
	n := m.LocalNode()
	ip, _ := netip.AddrFromSlice(n.Addr)
	return netip.AddrPortFrom(ip.Unmap(), n.Port)
}

// TestGhostMemberNotTaken runs real memberlists on 127.0.0.1: a relay
// (without admission) takes a ghost member, and a Gossip that holds the
// registered nodes, joined to the relay, then merges the relay's state
// again: it takes the ghost only if the ghost is a registered node at its
// registered gossip address.
func TestGhostMemberNotTaken(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ghost func(ghost netip.AddrPort) (string, netip.AddrPort) // the registered entry made for it ("" none)
		taken bool
	}{
		{"unregistered name", func(netip.AddrPort) (string, netip.AddrPort) { return "", netip.AddrPort{} }, false},
		{"registered name at another port", func(g netip.AddrPort) (string, netip.AddrPort) {
			return "ghost", netip.AddrPortFrom(g.Addr(), g.Port()+1)
		}, false},
		{"registered name at another address", func(g netip.AddrPort) (string, netip.AddrPort) {
			return "ghost", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), g.Port())
		}, false},
		{"registered at its address", func(g netip.AddrPort) (string, netip.AddrPort) { return "ghost", g }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			relay := rawMember(t, "relay")
			g, err := gossip.New(gossip.Config{NodeName: "victim", BindAddr: netip.MustParseAddr("127.0.0.1"),
				BindPort: int(testnet.FreePort(t)), ReconnectInterval: -1, LeaveTimeout: time.Second, Logger: testutil.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = g.Close() }()
			reg := map[string]netip.AddrPort{"relay": addrOf(relay)}
			g.SetRegistered(reg)
			if _, err := g.Join(ctx, []string{addrOf(relay).String()}); err != nil {
				t.Fatalf("join the relay: %v", err)
			}
			ghost := rawMember(t, "ghost")
			if name, ap := tt.ghost(addrOf(ghost)); name != "" {
				reg[name] = ap
				g.SetRegistered(reg)
			}
			if _, err := ghost.Join([]string{addrOf(relay).String()}); err != nil {
				t.Fatalf("ghost joins the relay: %v", err)
			}
			// The relay merges the ghost's state after the ghost's Join
			// has returned: wait for it, else the victim's push/pull may
			// not carry the ghost at all (and the cases that refuse it
			// would pass for that reason).
			testutil.Eventually(t, 10*time.Second, time.Millisecond, "the relay knowing the ghost", func() bool {
				return slices.ContainsFunc(relay.Members(), func(n *memberlist.Node) bool { return n.Name == "ghost" })
			})
			// A join is a push/pull: the relay's state, ghost included,
			// is merged before Join returns.
			_, err = g.Join(ctx, []string{addrOf(relay).String()})
			got := states(g)
			if _, ok := got["ghost"]; ok != tt.taken {
				t.Errorf("victim's members %v (join: %v); ghost taken %v, want %v", got, err, ok, tt.taken)
			}
			if got["relay"] != gossip.StateAlive {
				t.Errorf("victim's members %v; want the relay alive", got)
			}
		})
	}
}

// TestRefusedJoinRetried: a member whose join was refused (the seed is
// no registered node yet) joins the seeds again while it is alone, and
// gets in once the seed is registered.
func TestRefusedJoinRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var network memberlist.MockNetwork
	trA, trB := newCutTransport(&network, "node-a"), newCutTransport(&network, "node-b")
	a, err := gossip.New(fast("node-a", trA, testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := gossip.New(fast("node-b", trB, testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		trA.down.Store(true)
		trB.down.Store(true)
		_ = a.Close()
		_ = b.Close()
		trA.close()
		trB.close()
	}()
	a.SetRegistered(map[string]netip.AddrPort{})
	b.SetRegistered(map[string]netip.AddrPort{})
	if _, err := b.Join(ctx, []string{a.Addr().String()}); err == nil {
		t.Fatal("join of an unregistered seed succeeded; want refused")
	}
	if got := states(b); len(got) != 1 {
		t.Fatalf("node-b's members after the refused join: %v; want itself only", got)
	}
	a.SetRegistered(map[string]netip.AddrPort{"node-b": b.Addr()})
	b.SetRegistered(map[string]netip.AddrPort{"node-a": a.Addr()})
	testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "node-a and node-b alive in each other's views", func() bool { return allAlive(a, 2) && allAlive(b, 2) })
}
