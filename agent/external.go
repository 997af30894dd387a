package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/stringers"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// resolveTimeout bounds the resolution of an external target's DNS name
// (within the work's own deadline).
const resolveTimeout = 5 * time.Second

// LookupNetIPFunc resolves host to its addresses, as
// (*net.Resolver).LookupNetIP does with network "ip"; it must return when
// ctx ends.
type LookupNetIPFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// externalList keeps of list the usable external targets, by name and
// their names in list's order. An entry that
// protocol.ValidateExternalTarget refuses or that repeats an earlier
// entry's name is dropped with a warning naming it and the reason; the
// entries after the first protocol.MaxExternalTargets are dropped with one
// warning naming the first of them and how many.
func (t *targets) externalList(list []*measurev1.ExternalTarget) (map[string]*measurev1.ExternalTarget, []string) {
	if n := len(list); n > protocol.MaxExternalTargets {
		first := list[protocol.MaxExternalTargets]
		t.log.Warn("coordinator sent more external targets than an agent keeps; the tail is dropped",
			"entries", n, "kept", protocol.MaxExternalTargets, "first_dropped", first.GetName(),
			"err", fmt.Sprintf("the list has %d entries, above the %d an agent keeps: %d entries from %.70q on dropped",
				n, protocol.MaxExternalTargets, n-protocol.MaxExternalTargets, first.GetName()))
		list = list[:protocol.MaxExternalTargets]
	}
	m := make(map[string]*measurev1.ExternalTarget, len(list))
	names := make([]string, 0, len(list))
	for _, e := range list {
		var err error
		switch {
		case m[e.GetName()] != nil:
			err = fmt.Errorf("external target name %q repeats an earlier entry's", e.GetName())
		default:
			err = protocol.ValidateExternalTarget(e)
		}
		if err != nil {
			t.log.Warn("coordinator sent an external target that is unusable; dropped",
				"external_target", e.GetName(), "address", e.GetAddress(), "http_url", e.GetHttpUrl(), "err", err)
			continue
		}
		m[e.GetName()] = e
		names = append(names, e.GetName())
	}
	return m, names
}

// externalTarget returns the entry named name of the last external list,
// or nil.
func (t *targets) externalTarget(name string) *measurev1.ExternalTarget {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.external[name]
}

// externalString lists the known external target names for a refusal:
// the first maxListed, in the coordinator's order.
func (t *targets) externalString() string {
	t.mu.RLock()
	names := t.externalNames
	t.mu.RUnlock()
	switch {
	case len(names) == 0:
		return "none (the coordinator has sent none)"
	case len(names) > maxListed:
		return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// external checks a RunClient that names an external target and resolves
// the target's address. It returns the target for the runner, or a
// failure status (INVALID for a refused request, UNREACHABLE for a name
// that does not resolve to a usable address, TIMEOUT or CANCELED when ctx
// ended meanwhile) and its message.
func (a *Agent) external(ctx context.Context, rc *agentv1.RunClient) (runner.External, measurev1.Status, string) {
	name := rc.GetExternalTarget()
	e := a.targets.externalTarget(name)
	if e == nil {
		return runner.External{}, measurev1.Status_STATUS_INVALID, fmt.Sprintf(
			"external_target %q refused: it is not in the coordinator's list of external targets; known: %s", name, a.targets.externalString())
	}
	if err := runner.CheckExternal(rc, e); err != nil {
		var f *runner.Failure
		if errors.As(err, &f) {
			return runner.External{}, f.Status, f.Message
		}
		return runner.External{}, measurev1.Status_STATUS_INVALID, err.Error()
	}
	ip, err := a.resolve(ctx, e.GetAddress())
	if err != nil {
		st := measurev1.Status_STATUS_UNREACHABLE
		switch {
		case isRefusedAddress(err):
			return runner.External{}, measurev1.Status_STATUS_INVALID, fmt.Sprintf("external_target %q refused: address %s: %v", name, e.GetAddress(), err)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			st = measurev1.Status_STATUS_TIMEOUT
		case ctx.Err() != nil:
			st = measurev1.Status_STATUS_CANCELED
		}
		return runner.External{}, st, fmt.Sprintf("external_target %q: resolve %s: %v", name, e.GetAddress(), err)
	}
	return runner.External{Name: name, IP: ip, HTTPURL: e.GetHttpUrl(), Iperf3Port: e.GetIperf3Port(),
		QperfPort: e.GetQperfPort(), QperfDataPort: e.GetQperfDataPort()}, measurev1.Status_STATUS_OK, ""
}

// refusedAddress is an address an external target may not be sent to
// (see Agent.externalIP).
type refusedAddress struct{ error }

// isRefusedAddress reports whether err (of resolve) is a refused address
// rather than a failed resolution.
func isRefusedAddress(err error) bool {
	var r refusedAddress
	return errors.As(err, &r)
}

// externalIP checks an address an external target's entry names or
// resolves to: protocol.CheckExternalIP (no link-local address, the cloud
// metadata service's among them, no other metadata address), and no
// loopback address but within an --allow-target CIDR (tests on one
// machine): a name whose DNS points at 127.0.0.1 must not turn the
// agent's HTTP test onto its own node's local services; and, with
// --external-cidr, nothing outside those CIDRs. The error is a
// refusedAddress naming the address.
func (a *Agent) externalIP(ip netip.Addr) error {
	if err := protocol.CheckExternalIP(ip); err != nil {
		return refusedAddress{err}
	}
	within := func(ps []netip.Prefix) bool {
		return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(ip) })
	}
	if ip.IsLoopback() && !within(a.cfg.AllowTargets) {
		return refusedAddress{fmt.Errorf("%s is loopback: an external target may be one only within an --allow-target CIDR (--allow-target %s)",
			ip, stringers.Join(a.cfg.AllowTargets, ", ", "none"))}
	}
	if len(a.cfg.ExternalCIDRs) > 0 && !within(a.cfg.ExternalCIDRs) {
		return refusedAddress{fmt.Errorf("%s is outside this agent's --external-cidr %s", ip, stringers.Join(a.cfg.ExternalCIDRs, ", ", "none"))}
	}
	return nil
}

// resolve returns address as an IP: an IP literal as it is, a DNS name
// through cfg.LookupNetIP within resolveTimeout, in the agent's own (host)
// network namespace whatever the client's network. Of the answer, it takes
// the first IPv4 address, else the first IPv6 one, that
// protocol.ParseEndpointIP and externalIP accept (IPv4-mapped answers are
// read as IPv4). A literal, or an answer with no usable address but some
// externalIP refuses, is a refusedAddress.
func (a *Agent) resolve(ctx context.Context, address string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(address); err == nil {
		if err := a.externalIP(ip); err != nil {
			return netip.Addr{}, err
		}
	}
	ip, err := protocol.ParseExternalAddress(address)
	if err != nil || ip.IsValid() {
		return ip, err
	}
	lookup := a.cfg.LookupNetIP
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := lookup(ctx, "ip", address)
	if err != nil {
		return netip.Addr{}, err
	}
	return pickAddr(addrs, a.externalIP)
}

// pickAddr returns the first IPv4 address of addrs, else the first IPv6
// one, skipping those protocol.ParseEndpointIP refuses (unspecified,
// multicast, broadcast, zoned) and those allow refuses; IPv4-mapped IPv6
// counts as IPv4. When only allow's refusals are left, the error is the
// first of them (a refusedAddress), after the answer.
func pickAddr(addrs []netip.Addr, allow func(netip.Addr) error) (netip.Addr, error) {
	var v6 netip.Addr
	var refused error
	for _, ip := range addrs {
		ip = ip.Unmap()
		if _, err := protocol.ParseEndpointIP(ip.String()); err != nil {
			continue
		}
		if err := allow(ip); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		if ip.Is4() {
			return ip, nil
		}
		if !v6.IsValid() {
			v6 = ip
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	switch {
	case len(addrs) == 0:
		return netip.Addr{}, errors.New("no address in the answer")
	case refused != nil:
		return netip.Addr{}, refusedAddress{fmt.Errorf("no usable address in the answer %v: %w", addrs, refused)}
	}
	return netip.Addr{}, fmt.Errorf("no usable address in the answer %v", addrs)
}
