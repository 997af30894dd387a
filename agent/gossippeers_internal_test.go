package agent

import (
	"log/slog"
	"maps"
	"net/netip"
	"testing"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func hostEndpoint(name, hostIP string) *agentv1.NodeEndpoint {
	return &agentv1.NodeEndpoint{NodeName: name, Addresses: []*measurev1.NetworkAddress{
		{Network: measurev1.Network_NETWORK_POD, Ip: "10.244.9.9"},
		{Network: measurev1.Network_NETWORK_HOST, Ip: hostIP},
	}}
}

// TestGossipRegistered: the gossip's registered nodes are those of the
// Endpoints and of the probe plan at their host IPs, on the port a seed
// names for that IP, else the agent's own gossip port, and on any port
// when several nodes share the IP; none before either came.
func TestGossipRegistered(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tt := range []struct {
		name  string
		ep    *agentv1.Endpoints
		plan  *agentv1.ProbePlan
		seeds []string
		want  map[string]netip.AddrPort // nil: not known
	}{
		{name: "nothing yet", seeds: []string{"172.18.0.11:8000"}},
		{name: "empty Endpoints", ep: &agentv1.Endpoints{}},
		{name: "Endpoints, own port", ep: &agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{hostEndpoint("node-1", "172.18.0.11")}},
			want: map[string]netip.AddrPort{"node-1": ap("172.18.0.11:7946")}},
		{name: "Endpoints, seed port", ep: &agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{hostEndpoint("node-1", "172.18.0.11"), hostEndpoint("node-2", "172.18.0.12")}},
			seeds: []string{"172.18.0.11:8000", "bad"}, want: map[string]netip.AddrPort{"node-1": ap("172.18.0.11:8000"), "node-2": ap("172.18.0.12:7946")}},
		{name: "shared host IP, any port", ep: &agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{hostEndpoint("node-1", "127.0.0.1"), hostEndpoint("node-2", "127.0.0.1")}},
			seeds: []string{"127.0.0.1:8000"}, want: map[string]netip.AddrPort{"node-1": ap("127.0.0.1:0"), "node-2": ap("127.0.0.1:0")}},
		{name: "probe plan with no peers", plan: &agentv1.ProbePlan{Version: 1}, want: map[string]netip.AddrPort{}},
		{name: "probe plan and Endpoints", plan: &agentv1.ProbePlan{Version: 1, Upsert: []*agentv1.ProbePeer{{NodeName: "node-3", HostIp: "172.18.0.13"}}},
			ep:   &agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{hostEndpoint("node-1", "172.18.0.11")}},
			want: map[string]netip.AddrPort{"node-1": ap("172.18.0.11:7946"), "node-3": ap("172.18.0.13:7946")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTargets(nil, false, slog.New(slog.DiscardHandler))
			tg.setGossipSeeds(tt.seeds)
			if tt.ep != nil {
				tg.setEndpoints(tt.ep)
			}
			if tt.plan != nil {
				tg.applyPlan(tt.plan)
			}
			got := tg.gossipRegistered(7946)
			if (got == nil) != (tt.want == nil) || !maps.Equal(got, tt.want) {
				t.Errorf("gossipRegistered = %v, want %v", got, tt.want)
			}
		})
	}
}
