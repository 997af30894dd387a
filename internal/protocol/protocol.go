// Package protocol holds what both ends of the agent<->coordinator stream
// must agree on beyond the generated types: the protocol version, the
// rules for node names and addresses, work IDs and their deadlines
// (work.go), heartbeats, the servers' default ports, the continuous
// probes' bounds, IP families, external targets and the cloud metadata
// addresses they may not be, and the bounds of the texts an answer
// carries.
package protocol

import (
	"fmt"
	"net/netip"
)

// Version is the version of proto/meshperf/agent/v1 both sides speak; the
// coordinator refuses an agent that announces another one.
const Version = 1

// ValidateNodeName checks a Kubernetes node name: a DNS-1123 subdomain of
// 1..253 characters (lower-case alphanumerics, '-' and '.', starting and
// ending with an alphanumeric). The error names the value (its first 64
// bytes, quoted).
func ValidateNodeName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("node name %.64q must be 1..253 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '-' && c != '.' || (i == 0 || i == len(name)-1) && !alnum {
			return fmt.Errorf("node name %.64q is not a DNS-1123 subdomain (lower-case alphanumerics, '-', '.')", name)
		}
	}
	return nil
}

// ParseEndpointIP parses an address a node announces, or a test may send
// to: a unicast IPv4 or IPv6 address. It refuses the unspecified address
// (0.0.0.0, ::), multicast, the IPv4 limited broadcast 255.255.255.255,
// IPv4-mapped IPv6 (write the IPv4 form) and zoned addresses; loopback is
// allowed (tests on one machine use it). The error names the value.
func ParseEndpointIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	case ip.IsUnspecified():
		return netip.Addr{}, fmt.Errorf("%q is the unspecified address", s)
	case ip.IsMulticast():
		return netip.Addr{}, fmt.Errorf("%q is a multicast address", s)
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return netip.Addr{}, fmt.Errorf("%q is the broadcast address", s)
	case ip.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is IPv4-mapped IPv6; use %s", s, ip.Unmap())
	case ip.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone; use a routable address", s)
	}
	return ip, nil
}
