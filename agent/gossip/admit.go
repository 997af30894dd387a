package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/meshperf/meshperf/internal/protocol"
)

// ErrRefusedMember is wrapped by every refusal of a member (Config's
// address classes, SetRegistered's nodes). memberlist's own log lines that
// carry it are demoted to debug: admission logs refusals itself, at most
// once a second.
var ErrRefusedMember = errors.New("gossip: refused member")

// checkAddrClass returns nil if ip may be a member's address: not
// unspecified, multicast, a cloud metadata address, loopback (unless
// loopback) or link-local (unless linkLocal).
func checkAddrClass(ip netip.Addr, loopback, linkLocal bool) error {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return errors.New("is not an IP address")
	case ip.IsUnspecified():
		return errors.New("is unspecified")
	case ip.IsMulticast():
		return errors.New("is multicast")
	}
	if protocol.IsMetadataService(ip) {
		return errors.New("is a cloud metadata address")
	}
	switch {
	case ip.IsLoopback() && !loopback:
		return errors.New("is loopback (allowed only when this member's own address is, or with Config.AllowLoopback)")
	case (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) && !linkLocal:
		return errors.New("is link-local (allowed only when this member's own address is)")
	}
	return nil
}

// admission is memberlist's AliveDelegate and MergeDelegate: it refuses
// members at addresses of a refused class and, once SetRegistered gave it
// the registered nodes, members that are none of them or not at their
// registered address. memberlist calls it with its locks held: it never
// blocks and never calls back into memberlist.
type admission struct {
	self                string
	loopback, linkLocal bool
	log                 *slog.Logger

	mu         sync.Mutex
	registered map[string]netip.AddrPort // nil: not known yet
	refused    int                       // refusals since the last log
	lastLog    time.Time
}

var (
	_ memberlist.AliveDelegate = (*admission)(nil)
	_ memberlist.MergeDelegate = (*admission)(nil)
)

// NotifyAlive refuses an alive message about a member admit refuses.
func (a *admission) NotifyAlive(n *memberlist.Node) error {
	return a.refuse(a.admit(n))
}

// NotifyMerge refuses a whole push/pull join if admit refuses one of its
// members.
func (a *admission) NotifyMerge(nodes []*memberlist.Node) error {
	for _, n := range nodes {
		if err := a.admit(n); err != nil {
			return a.refuse(fmt.Errorf("join state: %w", err))
		}
	}
	return nil
}

// admit returns nil if n may be a member. This member itself always may:
// memberlist keeps its own address whatever others announce.
func (a *admission) admit(n *memberlist.Node) error {
	ip, _ := netip.AddrFromSlice(n.Addr)
	return a.admitAt(n.Name, netip.AddrPortFrom(ip.Unmap(), n.Port))
}

// admitAt is admit of the member name at addr.
func (a *admission) admitAt(name string, addr netip.AddrPort) error {
	if name == a.self {
		return nil
	}
	if err := checkAddrClass(addr.Addr(), a.loopback, a.linkLocal); err != nil {
		return fmt.Errorf("%w %q: address %s %w", ErrRefusedMember, name, addr, err)
	}
	a.mu.Lock()
	reg, known := a.registered, a.registered != nil
	want, ok := reg[name]
	a.mu.Unlock()
	switch {
	case !known:
		return nil
	case !ok:
		return fmt.Errorf("%w %q at %s: no registered node has that name", ErrRefusedMember, name, addr)
	case want.Addr() != addr.Addr() || (want.Port() != 0 && want.Port() != addr.Port()):
		return fmt.Errorf("%w %q: address %s is not its registered gossip address %s", ErrRefusedMember, name, addr, want)
	}
	return nil
}

// refuse logs err, if not nil, at most once a second with the count of
// refusals since the last log, and returns it.
func (a *admission) refuse(err error) error {
	if err == nil {
		return nil
	}
	a.mu.Lock()
	a.refused++
	now := time.Now()
	n, due := a.refused, now.Sub(a.lastLog) >= time.Second
	if due {
		a.refused, a.lastLog = 0, now
	}
	a.mu.Unlock()
	if due {
		a.log.Warn("gossip members refused", "refused", n, "last", err)
	}
	return err
}

// setRegistered replaces the registered nodes (a copy of nodes).
func (a *admission) setRegistered(nodes map[string]netip.AddrPort) {
	reg := make(map[string]netip.AddrPort, len(nodes))
	for name, ap := range nodes {
		reg[name] = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	a.mu.Lock()
	a.registered = reg
	a.mu.Unlock()
}

// SetRegistered gives the registered nodes, by name, with their gossip
// address (host IP and gossip port; port 0: any port). From then on a
// member other than this one is taken only if it is one of them, at that
// address; before the first call, any member whose address is of an
// allowed class is. Each call replaces the set; a nil or empty one
// refuses every other member.
func (g *Gossip) SetRegistered(nodes map[string]netip.AddrPort) { g.admit.setRegistered(nodes) }

// isRefusal reports whether a memberlist log line is about a refusal.
func isRefusal(msg string) bool { return strings.Contains(msg, ErrRefusedMember.Error()) }
