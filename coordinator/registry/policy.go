package registry

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/stringers"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// This file holds the address policy of registrations: which classes of
// addresses a node may announce, the CIDRs its addresses must be in, and,
// in a cluster, the addresses the API server gives the node.

// AddressClass names a class of addresses that no registered address
// (host IP, pod IP, service IP) may be in unless the operator allows it
// (AddressPolicy.Allow, coordinator serve --allow-addresses).
type AddressClass string

// The address classes an operator may allow. The unspecified address,
// multicast and the IPv4 broadcast address are refused whatever the
// policy (protocol.ParseEndpointIP: no client can send a test to them),
// and so are the cloud metadata services outside link-local
// (protocol.MetadataService).
const (
	// ClassLoopback is 127.0.0.0/8 and ::1: the node itself, which tests
	// and labs on one machine register.
	ClassLoopback AddressClass = "loopback"
	// ClassLinkLocal is 169.254.0.0/16 and fe80::/10, where the cloud
	// metadata service 169.254.169.254 is.
	ClassLinkLocal AddressClass = "link-local"
)

// ParseAddressClasses parses a comma-separated list of address classes
// (loopback, link-local; "" is none), as --allow-addresses takes them.
// The error names the value that is no class.
func ParseAddressClasses(s string) ([]AddressClass, error) {
	var out []AddressClass
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		c := AddressClass(strings.TrimSpace(f))
		switch c {
		case ClassLoopback, ClassLinkLocal:
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		case "unspecified", "multicast", "broadcast", "metadata":
			return nil, fmt.Errorf("address class %q cannot be allowed: no test can be sent to such an address; allowed classes are loopback and link-local", f)
		default:
			return nil, fmt.Errorf("address class %q: want loopback or link-local", f)
		}
	}
	return out, nil
}

// ClusterAddresses tells, in a cluster, which addresses the API server
// gives a node (coordinator/kube.Addresses, from informers' caches: no API
// call per registration).
type ClusterAddresses interface {
	// NodeIPs returns the InternalIP and ExternalIP addresses of node's
	// Node object; an error if there is no such Node.
	NodeIPs(ctx context.Context, node string) ([]netip.Addr, error)
	// EndpointPodIPs returns the status.podIPs of the pod endpoint that
	// runs on node; an error if there is none.
	EndpointPodIPs(ctx context.Context, node string) ([]netip.Addr, error)
}

// AddressPolicy is what addresses a registration may carry. Each
// registered address must be a unicast address of no refused class
// (loopback and link-local unless allowed); the host IP must be inside
// NodeCIDRs, the pod IP inside PodCIDRs and the service IP inside
// ServiceCIDRs (an empty list: any address); and with Cluster, the host IP
// must be one of the node's Node addresses and the pod IP one of its pod
// endpoint's.
type AddressPolicy struct {
	// Allow lists the classes allowed besides unicast addresses.
	Allow []AddressClass
	// NodeCIDRs, PodCIDRs and ServiceCIDRs are the prefixes the host,
	// pod and service IPs must be in (the config file's node_cidrs,
	// pod_cidrs and service_cidrs); empty means any address.
	NodeCIDRs, PodCIDRs, ServiceCIDRs []netip.Prefix
	// Cluster, if set, gives the addresses the API server knows of each
	// node (coordinator serve --kubernetes).
	Cluster ClusterAddresses
}

// permissive is the policy of a registry without Config.Addresses:
// loopback and link-local allowed, any CIDR.
var permissive = &AddressPolicy{Allow: []AddressClass{ClassLoopback, ClassLinkLocal}}

// Check checks the policy itself: the prefixes must be masked (10.0.0.0/8,
// not 10.1.2.3/8) and unzoned. The error names the list and the entry.
func (p *AddressPolicy) Check() error {
	for _, l := range []struct {
		name string
		list []netip.Prefix
	}{{"node_cidrs", p.NodeCIDRs}, {"pod_cidrs", p.PodCIDRs}, {"service_cidrs", p.ServiceCIDRs}} {
		for i, c := range l.list {
			if err := CheckCIDR(c); err != nil {
				return fmt.Errorf("%s[%d]: %w", l.name, i, err)
			}
		}
	}
	for _, c := range p.Allow {
		if _, err := ParseAddressClasses(string(c)); err != nil {
			return fmt.Errorf("allowed address classes: %w", err)
		}
	}
	return nil
}

// CheckCIDR checks one prefix of an address policy: valid, masked (no
// host bits set), of an unmapped address. The error names the prefix.
func CheckCIDR(c netip.Prefix) error {
	switch {
	case !c.IsValid():
		return fmt.Errorf("%q is not a CIDR prefix", c)
	case c.Addr().Is4In6():
		return fmt.Errorf("%s is IPv4-mapped IPv6; write the IPv4 prefix", c)
	case c.Masked() != c:
		return fmt.Errorf("%s has host bits set; did you mean %s?", c, c.Masked())
	}
	return nil
}

// allows reports whether class c is allowed.
func (p *AddressPolicy) allows(c AddressClass) bool { return slices.Contains(p.Allow, c) }

// checkClass refuses an address of a class the policy does not allow.
// field names the registration's field (e.g. "addresses[0].ip").
func (p *AddressPolicy) checkClass(field string, ip netip.Addr) error {
	switch {
	case ip.IsLoopback() && !p.allows(ClassLoopback):
		return fmt.Errorf("%s %s is a loopback address, refused unless the coordinator runs with --allow-addresses loopback", field, ip)
	case ip.IsLinkLocalUnicast() && !p.allows(ClassLinkLocal):
		return fmt.Errorf("%s %s is link-local (169.254.0.0/16 or fe80::/10, where the cloud metadata service 169.254.169.254 is), refused unless the coordinator runs with --allow-addresses link-local",
			field, ip)
	case protocol.MetadataService(ip) != "":
		return fmt.Errorf("%s %s is the cloud metadata service of %s, refused", field, ip, protocol.MetadataService(ip))
	case embeds4(ip):
		return fmt.Errorf("%s %s embeds an IPv4 address (IPv4-compatible ::/96, IPv4-translated ::ffff:0:0:0/96, NAT64 64:ff9b::/96, 64:ff9b:1::/48 or 6to4 2002::/16): tests would reach that IPv4 address, refused; register the IPv4 address itself", field, ip)
	}
	return nil
}

// checkCIDRs refuses an address outside cidrs (none: any), which are the
// config file's list named list.
func checkCIDRs(field string, ip netip.Addr, list string, cidrs []netip.Prefix) error {
	if len(cidrs) == 0 {
		return nil
	}
	for _, c := range cidrs {
		if c.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("%s %s is outside %s (%s) of the coordinator's config", field, ip, list, joinPrefixes(cidrs))
}

// maxListedPrefixes bounds the prefixes a refusal lists.
const maxListedPrefixes = 8

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, 0, min(len(ps), maxListedPrefixes))
	for _, p := range ps[:min(len(ps), maxListedPrefixes)] {
		s = append(s, p.String())
	}
	if len(ps) > maxListedPrefixes {
		s = append(s, fmt.Sprintf("and %d more", len(ps)-maxListedPrefixes))
	}
	return strings.Join(s, ", ")
}

// checkNode checks n's addresses against the policy: classes and CIDRs.
// The fields are those of the Register message.
func (p *AddressPolicy) checkNode(n Node, hostField, podField string) error {
	for _, a := range []struct {
		field, list string
		ip          netip.Addr
		cidrs       []netip.Prefix
	}{
		{hostField, "node_cidrs", n.HostIP, p.NodeCIDRs},
		{podField, "pod_cidrs", n.PodIP, p.PodCIDRs},
		{"service_ip", "service_cidrs", n.ServiceIP, p.ServiceCIDRs},
	} {
		if !a.ip.IsValid() {
			continue
		}
		if err := p.checkClass(a.field, a.ip); err != nil {
			return err
		}
		if err := checkCIDRs(a.field, a.ip, a.list, a.cidrs); err != nil {
			return err
		}
	}
	return nil
}

// checkNode6 is checkNode for n's IPv6 addresses beside IPv4 ones
// (HostIPv6, PodIPv6, ServiceIPv6), against the same lists.
func (p *AddressPolicy) checkNode6(n Node, hostField, podField string) error {
	return p.checkNode(Node{HostIP: n.HostIPv6, PodIP: n.PodIPv6, ServiceIP: n.ServiceIPv6}, hostField, podField)
}

// checkCluster checks n's host and pod IPs against what the API server
// knows of the node (AddressPolicy.Cluster); nil without a Cluster.
func (p *AddressPolicy) checkCluster(ctx context.Context, n Node) error {
	if p.Cluster == nil {
		return nil
	}
	ips, err := p.Cluster.NodeIPs(ctx, n.Name)
	if err != nil {
		return fmt.Errorf("host IP %s of node %q: %w", n.HostIP, n.Name, err)
	}
	for _, ip := range []netip.Addr{n.HostIP, n.HostIPv6} {
		if ip.IsValid() && !slices.Contains(ips, ip) {
			return fmt.Errorf("host IP %s is not an address of the Node object %q (status.addresses InternalIP and ExternalIP: %s)", ip, n.Name, stringers.Join(ips, ", ", "none"))
		}
	}
	if !n.PodIP.IsValid() {
		return nil
	}
	ips, err = p.Cluster.EndpointPodIPs(ctx, n.Name)
	if err != nil {
		return fmt.Errorf("pod IP %s of node %q: %w", n.PodIP, n.Name, err)
	}
	for _, ip := range []netip.Addr{n.PodIP, n.PodIPv6} {
		if ip.IsValid() && !slices.Contains(ips, ip) {
			return fmt.Errorf("pod IP %s is not an address of node %q's pod endpoint (status.podIPs: %s)", ip, n.Name, stringers.Join(ips, ", ", "none"))
		}
	}
	return nil
}

// admit checks a Register (validateRegister, then the cluster's
// addresses) and turns it into a Node; a refusal is logged with its
// reason.
func (r *Registry) admit(ctx context.Context, reg *agentv1.Register) (Node, error) {
	n, err := validateRegister(reg, r.cfg.Addresses)
	if err == nil {
		err = r.checkCluster(ctx, n)
	}
	if err != nil {
		r.log.Warn("registration refused", "node", reg.GetNodeName()[:min(len(reg.GetNodeName()), maxTextLength)], "err", err)
		return Node{}, err
	}
	return n, nil
}

// clusterCheckTimeout bounds the cluster check of a registration.
const clusterCheckTimeout = 10 * time.Second

// checkCluster checks a registering node against the cluster
// (AddressPolicy.Cluster); the error wraps ErrBadRegistration.
func (r *Registry) checkCluster(ctx context.Context, n Node) error {
	ctx, cancel := context.WithTimeout(ctx, clusterCheckTimeout)
	defer cancel()
	if err := r.cfg.Addresses.checkCluster(ctx, n); err != nil {
		return fmt.Errorf("%w: node %q: %w", ErrBadRegistration, n.Name, err)
	}
	return nil
}

// embeds4 reports whether ip is an IPv6 form of an IPv4 address
// (protocol.EmbeddedIPv4).
func embeds4(ip netip.Addr) bool {
	_, ok := protocol.EmbeddedIPv4(ip)
	return ok
}
