package registry

import (
	"fmt"
	"net/netip"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/safetext"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds what a registration must be: the checks of an agent's
// Register, and the address conflicts between connected nodes.

// Limits of a registration, so that one agent cannot bloat the
// coordinator's memory, store or answers.
const (
	maxAddresses = 4
	maxTools     = 16
	// maxTextLength bounds the agent's version and each tool's version
	// and error; the agent cuts the tools' texts to it
	// (protocol.BoundToolInfo).
	maxTextLength = safetext.MaxToolVersionBytes
)

// validateRegister checks an agent's Register message and turns it into a
// Node. Addresses must be usable unicast IPs (not unspecified, multicast,
// broadcast, IPv4-mapped, zoned, IPv6 link-local or an IPv6 form that
// embeds an IPv4 address: IPv4-compatible, IPv4-translated, NAT64), at most one per
// network and family (a dual-stack node has one of each), and pass policy
// (nil: permissive); ports must be 0 or 1..65535; texts must be short and
// printable.
func validateRegister(reg *agentv1.Register, policy *AddressPolicy) (Node, error) {
	if policy == nil {
		policy = permissive
	}
	if v := reg.GetProtocolVersion(); v != protocol.Version {
		return Node{}, fmt.Errorf("%w: agent %q (version %.64q) speaks protocol %d, this coordinator speaks %d; run matching versions",
			ErrVersionMismatch, reg.GetNodeName(), reg.GetAgentVersion(), v, protocol.Version)
	}
	bad := func(format string, args ...any) (Node, error) {
		return Node{}, fmt.Errorf("%w: "+format, append([]any{ErrBadRegistration}, args...)...)
	}
	n := Node{Name: reg.GetNodeName()}
	var hostField, podField, host6Field, pod6Field string
	if err := protocol.ValidateNodeName(n.Name); err != nil {
		return bad("%v", err)
	}
	if err := printable("agent_version", reg.GetAgentVersion()); err != nil {
		return bad("%v", err)
	}
	if len(reg.GetAddresses()) > maxAddresses {
		return bad("%d addresses, at most %d", len(reg.GetAddresses()), maxAddresses)
	}
	for i, a := range reg.GetAddresses() {
		ip, err := protocol.ParseEndpointIP(a.GetIp())
		if err != nil {
			return bad("addresses[%d].ip: %v", i, err)
		}
		// The network's primary and IPv6 address, and the fields that
		// name where each came from.
		var slot, slot6 *netip.Addr
		var field, field6 *string
		var network string
		switch a.GetNetwork() {
		case measurev1.Network_NETWORK_HOST:
			slot, slot6, field, field6, network = &n.HostIP, &n.HostIPv6, &hostField, &host6Field, "host"
		case measurev1.Network_NETWORK_POD:
			slot, slot6, field, field6, network = &n.PodIP, &n.PodIPv6, &podField, &pod6Field, "pod"
		default:
			return bad("addresses[%d].network %v is not host or pod", i, a.GetNetwork())
		}
		if !slot.IsValid() {
			*field = fmt.Sprintf("addresses[%d].ip (%s)", i, network)
		} else {
			*field6 = fmt.Sprintf("addresses[%d].ip (%s)", i, network)
		}
		switch {
		case !slot.IsValid():
			*slot = ip
		case slot6.IsValid() || protocol.FamilyOf(*slot) == protocol.FamilyOf(ip):
			return bad("addresses[%d]: a second address for network %v (%s)", i, a.GetNetwork(), protocol.FamilyName(protocol.FamilyOf(ip)))
		case ip.Is4():
			// IPv4 is the primary address of a dual-stack node.
			*slot, *slot6 = ip, *slot
			*field, *field6 = *field6, *field
		default:
			*slot6 = ip
		}
	}
	if !n.HostIP.IsValid() {
		return bad("node %q has no host address", n.Name)
	}
	if s := reg.GetServiceIp(); s != "" {
		ip, err := protocol.ParseEndpointIP(s)
		if err != nil {
			return bad("service_ip: %v", err)
		}
		n.ServiceIP = ip
	}
	if s := reg.GetServiceIpv6(); s != "" {
		ip, err := protocol.ParseEndpointIP(s)
		switch {
		case err != nil:
			return bad("service_ipv6: %v", err)
		case !ip.Is6():
			return bad("service_ipv6: %s is not an IPv6 address", ip)
		case !n.ServiceIP.IsValid():
			n.ServiceIP = ip // an IPv6-only node
		case n.ServiceIP.Is6():
			return bad("service_ipv6 %s beside an IPv6 service_ip %s", ip, n.ServiceIP)
		default:
			n.ServiceIPv6 = ip
		}
	}
	if err := policy.checkNode(n, hostField, podField); err != nil {
		return bad("node %q: %v", n.Name, err)
	}
	if err := policy.checkNode6(n, host6Field, pod6Field); err != nil {
		return bad("node %q: %v", n.Name, err)
	}
	if p := reg.GetGossipPort(); p > 65535 {
		return bad("gossip_port %d is not a port (0 or 1..65535)", p)
	}
	n.GossipPort = uint16(reg.GetGossipPort())
	if err := checkProbeRegistration(reg, &n); err != nil {
		return bad("%v", err)
	}
	if err := checkServerPorts(reg, &n); err != nil {
		return bad("%v", err)
	}
	if len(reg.GetTools()) > maxTools {
		return bad("%d tools, at most %d", len(reg.GetTools()), maxTools)
	}
	for i, t := range reg.GetTools() {
		if err := printable(fmt.Sprintf("tools[%d].version", i), t.GetVersion()); err != nil {
			return bad("%v", err)
		}
		if err := printable(fmt.Sprintf("tools[%d].error", i), t.GetError()); err != nil {
			return bad("%v", err)
		}
	}
	return n, nil
}

// printable refuses texts longer than maxTextLength or with control
// characters or bidirectional controls (safetext.NeedsEscape: they would
// rewrite an operator's terminal or reorder a line).
func printable(field, s string) error {
	if len(s) > maxTextLength {
		return fmt.Errorf("%s is %d bytes long, at most %d", field, len(s), maxTextLength)
	}
	for _, c := range s {
		if safetext.NeedsEscape(c) { // controls, bidi overrides, invalid UTF-8
			return fmt.Errorf("%s %.64q contains a control character", field, s)
		}
	}
	return nil
}

// checkConflicts refuses n if its service IP is a connected node's host or
// pod IP, or if it announces any address a connected node registered; the
// error wraps ErrBadRegistration. attach checks again, under the lock it
// attaches in, so that two registrations of one address at once cannot
// both pass.
func (r *Registry) checkConflicts(n Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conflictsLocked(n)
}

// conflictsLocked is checkConflicts with r.mu held.
func (r *Registry) conflictsLocked(n Node) error {
	if other, network := r.serviceIPConflictLocked(n); other != "" {
		r.log.Warn("registration refused: its service IP is another node's address", "node", n.Name, "service_ip", n.ServiceIP,
			"other_node", other, "network", network)
		return fmt.Errorf("%w: node %q: service_ip %s is the %s IP of connected node %q (its tests would measure that node)",
			ErrBadRegistration, n.Name, n.ServiceIP, network, other)
	}
	if other := r.conflictLocked(n); other != "" {
		return fmt.Errorf("%w: node %q announces an address that connected node %q registered", ErrBadRegistration, n.Name, other)
	}
	return nil
}

// serviceIPConflictLocked returns the connected node other than n's whose
// host or pod IP is n's service IP, and which of its addresses that is
// ("" if none): n's tests of its Service would measure that node instead.
// r.mu is held.
func (r *Registry) serviceIPConflictLocked(n Node) (node, network string) {
	if !n.ServiceIP.IsValid() {
		return "", ""
	}
	for _, svc := range []netip.Addr{n.ServiceIP, n.ServiceIPv6} {
		if !svc.IsValid() {
			continue
		}
		for _, s := range r.addrs[svc] {
			switch {
			case s.node.Name == n.Name:
			case s.node.HostIP == svc || s.node.HostIPv6 == svc:
				return s.node.Name, "host"
			case s.node.PodIP == svc || s.node.PodIPv6 == svc:
				return s.node.Name, "pod"
			}
		}
	}
	return "", ""
}

// conflictLocked returns the connected node other than n's that
// registered one of n's addresses, or ""; r.mu is held.
func (r *Registry) conflictLocked(n Node) string {
	for _, a := range n.addrs() {
		for _, s := range r.addrs[a] {
			if s.node.Name != n.Name {
				return s.node.Name
			}
		}
	}
	return ""
}

// addrs are n's valid addresses: host, pod and ClusterIP, in each family.
func (n Node) addrs() []netip.Addr {
	out := make([]netip.Addr, 0, 6)
	for _, a := range []netip.Addr{n.HostIP, n.PodIP, n.ServiceIP, n.HostIPv6, n.PodIPv6, n.ServiceIPv6} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}
