package registry

import (
	"net/netip"

	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds a node's addresses per IP family.

// Addr returns n's address on network (host or pod) in family f, or the
// zero Addr if it has none.
func (n Node) Addr(network measurev1.Network, f measurev1.IPFamily) netip.Addr {
	switch network {
	case measurev1.Network_NETWORK_HOST:
		return pick(f, n.HostIP, n.HostIPv6)
	case measurev1.Network_NETWORK_POD:
		return pick(f, n.PodIP, n.PodIPv6)
	}
	return netip.Addr{}
}

// ServiceAddr returns n's ClusterIP in family f, or the zero Addr.
func (n Node) ServiceAddr(f measurev1.IPFamily) netip.Addr {
	return pick(f, n.ServiceIP, n.ServiceIPv6)
}

// Families returns the families of n's host addresses, IPv4 first.
func (n Node) Families() []measurev1.IPFamily {
	var out []measurev1.IPFamily
	for _, f := range protocol.Families {
		if n.Addr(measurev1.Network_NETWORK_HOST, f).IsValid() {
			out = append(out, f)
		}
	}
	return out
}

// pick returns whichever of primary and v6 is of family f.
func pick(f measurev1.IPFamily, primary, v6 netip.Addr) netip.Addr {
	for _, a := range []netip.Addr{primary, v6} {
		if a.IsValid() && protocol.FamilyOf(a) == f {
			return a
		}
	}
	return netip.Addr{}
}

// HasProbeAddr reports whether the plan peer name has an address of
// family f where probes of path go: its host address (host-host), its pod
// address (host-pod, pod-pod) or its ClusterIP (the service paths). A
// node that is not a peer now has none.
func (r *Registry) HasProbeAddr(name string, path measurev1.Path, f measurev1.IPFamily) bool {
	r.mu.Lock()
	n, ok := r.peers[name]
	r.mu.Unlock()
	if !ok {
		return false
	}
	switch path {
	case measurev1.Path_PATH_HOST_TO_HOST:
		return n.Addr(measurev1.Network_NETWORK_HOST, f).IsValid()
	case measurev1.Path_PATH_HOST_TO_POD, measurev1.Path_PATH_POD_TO_POD:
		return n.Addr(measurev1.Network_NETWORK_POD, f).IsValid()
	case measurev1.Path_PATH_HOST_TO_SERVICE, measurev1.Path_PATH_POD_TO_SERVICE:
		return n.ServiceAddr(f).IsValid()
	}
	return false
}
