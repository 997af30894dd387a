package agent

import (
	"log/slog"
	"net/netip"
	"testing"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestTargetsKnowServiceIPs checks that only the service IPs of the
// Endpoints count as services (the agent waits for those to connect).
func TestTargetsKnowServiceIPs(t *testing.T) {
	tg := newTargets(nil, slog.New(slog.DiscardHandler))
	tg.setEndpoints(&agentv1.Endpoints{Nodes: []*agentv1.NodeEndpoint{{
		NodeName: "node-1", ServiceIp: "10.96.0.11",
		Addresses: []*agentv1.NetworkAddress{
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
