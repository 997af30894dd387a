package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/internal/protocol"
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
// protocol.ValidateExternalTarget refuses, that repeats an earlier entry's
// name, or that comes after the first protocol.MaxExternalTargets is
// dropped with a warning naming it and the reason.
func (t *targets) externalList(list []*agentv1.ExternalTarget) (map[string]*agentv1.ExternalTarget, []string) {
	m := make(map[string]*agentv1.ExternalTarget, len(list))
	names := make([]string, 0, len(list))
	for i, e := range list {
		var err error
		switch {
		case i >= protocol.MaxExternalTargets:
			err = fmt.Errorf("the list has %d entries, above the %d an agent keeps", len(list), protocol.MaxExternalTargets)
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
func (t *targets) externalTarget(name string) *agentv1.ExternalTarget {
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
	if err := runner.CheckExternal(rc, name, e.GetHttpUrl()); err != nil {
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
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			st = measurev1.Status_STATUS_TIMEOUT
		case ctx.Err() != nil:
			st = measurev1.Status_STATUS_CANCELED
		}
		return runner.External{}, st, fmt.Sprintf("external_target %q: resolve %s: %v", name, e.GetAddress(), err)
	}
	return runner.External{Name: name, IP: ip, HTTPURL: e.GetHttpUrl()}, measurev1.Status_STATUS_OK, ""
}

// resolve returns address as an IP: an IP literal as it is, a DNS name
// through cfg.LookupNetIP within resolveTimeout, in the agent's own (host)
// network namespace whatever the client's network. Of the answer, it takes
// the first IPv4 address, else the first IPv6 one, that
// protocol.ParseEndpointIP accepts (IPv4-mapped answers are read as IPv4).
func (a *Agent) resolve(ctx context.Context, address string) (netip.Addr, error) {
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
	return pickAddr(addrs)
}

// pickAddr returns the first IPv4 address of addrs, else the first IPv6
// one, skipping those protocol.ParseEndpointIP refuses (unspecified,
// multicast, broadcast, zoned); IPv4-mapped IPv6 counts as IPv4.
func pickAddr(addrs []netip.Addr) (netip.Addr, error) {
	var v6 netip.Addr
	for _, ip := range addrs {
		ip = ip.Unmap()
		if _, err := protocol.ParseEndpointIP(ip.String()); err != nil {
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
	if len(addrs) == 0 {
		return netip.Addr{}, errors.New("no address in the answer")
	}
	return netip.Addr{}, fmt.Errorf("no usable address in the answer %v", addrs)
}
