package agent

import (
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestTargetsKnowServiceIPs checks that only the service IPs of the
// Endpoints count as services (the agent waits for those to connect).
func TestTargetsKnowServiceIPs(t *testing.T) {
	tg := newTargets(nil, false, slog.New(slog.DiscardHandler))
	tg.setEndpoints(&agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{{
		NodeName: "node-1", ServiceIp: "10.96.0.11",
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: "172.18.0.11"},
			{Network: measurev1.Network_NETWORK_POD, Ip: "10.244.1.2"},
		},
	}}})
	tests := []struct {
		ip                       string
		wantAllowed, wantService bool
	}{
		{"10.96.0.11", true, true},
		{"172.18.0.11", true, false},
		{"10.244.1.2", true, false},
		{"10.96.0.12", false, false},
	}
	for _, tt := range tests {
		ip := netip.MustParseAddr(tt.ip)
		if got := tg.allowed(ip); got != tt.wantAllowed {
			t.Errorf("allowed(%s) = %v, want %v", ip, got, tt.wantAllowed)
		}
		if got := tg.isService(ip); got != tt.wantService {
			t.Errorf("isService(%s) = %v, want %v", ip, got, tt.wantService)
		}
	}
}

// TestEndpointsNameNodesOnly: Endpoints that name a link-local address,
// the cloud metadata service, a loopback address (outside a lab on
// loopback) or an IPv4-compatible form of one as a node's address or
// service IP make none of them a target: a coordinator cannot aim the
// agent's clients at the node's own services through Endpoints, as it
// cannot through a probe plan. A lab on loopback keeps its loopback
// addresses.
func TestEndpointsNameNodesOnly(t *testing.T) {
	ep := &agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{{
		NodeName: "node-1", ServiceIp: "169.254.169.254", ServiceIpv6: "fd00:ec2::254", HttpPort: 80,
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.0.1"},
			{Network: measurev1.Network_NETWORK_POD, Ip: "fe80::1"},
		},
	}, {
		NodeName: "node-2", ServiceIp: "::7f00:1",
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: "100.100.100.200"},
			{Network: measurev1.Network_NETWORK_POD, Ip: "10.244.2.2"},
		},
	}}}
	for _, tt := range []struct {
		name     string
		loopback bool
		allowed  []string
	}{
		{"a cluster", false, []string{"10.244.2.2"}},
		{"a lab on loopback", true, []string{"127.0.0.1", "10.244.2.2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTargets(nil, tt.loopback, slog.New(slog.DiscardHandler))
			tg.setEndpoints(ep)
			for _, s := range []string{"169.254.169.254", "fd00:ec2::254", "127.0.0.1", "fe80::1", "::7f00:1", "100.100.100.200", "10.244.2.2"} {
				if got, want := tg.allowed(netip.MustParseAddr(s)), slices.Contains(tt.allowed, s); got != want {
					t.Errorf("allowed(%s) = %v, want %v", s, got, want)
				}
			}
		})
	}
}
