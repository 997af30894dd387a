package kube

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
)

// portStrings renders ports as "name port/protocol".
func portStrings(ports []Port) string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
	}
	return strings.Join(out, ",")
}

// TestServicePorts checks the Service ports built from an agent's server
// ports: each server its port, iperf3's and qperf's data port on UDP too,
// none for a server the agent does not run, and an error naming both
// fields for two servers on one port.
func TestServicePorts(t *testing.T) {
	tests := []struct {
		name    string
		in      protocol.ServerPorts
		want    string
		wantErr string
	}{
		{"defaults", agentPorts, "iperf3-tcp 5201/TCP,iperf3-udp 5201/UDP,qperf 19765/TCP,qperf-data-tcp 19766/TCP," +
			"qperf-data-udp 19766/UDP,http 8080/TCP,probe-echo 7947/TCP", ""},
		{"custom", protocol.ServerPorts{Iperf3: 15201, Qperf: 29765, QperfData: 29766, HTTP: 18080, Probe: 17947},
			"iperf3-tcp 15201/TCP,iperf3-udp 15201/UDP,qperf 29765/TCP,qperf-data-tcp 29766/TCP," +
				"qperf-data-udp 29766/UDP,http 18080/TCP,probe-echo 17947/TCP", ""},
		{"no HTTP target, no probes", protocol.ServerPorts{Iperf3: 5201, Qperf: 19765, QperfData: 19766},
			"iperf3-tcp 5201/TCP,iperf3-udp 5201/UDP,qperf 19765/TCP,qperf-data-tcp 19766/TCP,qperf-data-udp 19766/UDP", ""},
		{"HTTP on iperf3's port", protocol.ServerPorts{Iperf3: 5201, Qperf: 19765, QperfData: 19766, HTTP: 5201}, "",
			"iperf3_port and http_port are both 5201"},
		{"probe on qperf's data port", protocol.ServerPorts{Iperf3: 5201, Qperf: 19765, QperfData: 7947, Probe: 7947}, "",
			"qperf_data_port and probe_port are both 7947"},
		{"none", protocol.ServerPorts{}, "", "registered no server port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServicePorts(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q (ports %s)", err, tt.wantErr, portStrings(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := portStrings(got); s != tt.want {
				t.Errorf("ports\n got %s\nwant %s", s, tt.want)
			}
		})
	}
}

// TestEnsureFollowsAgentPorts checks that a node's Service and
// EndpointSlice carry the ports its agent registered: an agent restarted
// with another iperf3 port and no HTTP target gets both objects updated in
// place (same ClusterIP), and ports that collide are refused before any
// write.
func TestEnsureFollowsAgentPorts(t *testing.T) {
	c, s, first := ensureNode1(t)
	ctx, ip := testnet.Ctx(t, 10*time.Second), node1PodIP
	moved := protocol.ServerPorts{Iperf3: 15201, Qperf: protocol.DefaultQperfPort, QperfData: protocol.DefaultQperfDataPort, Probe: 17947}
	writes := countWrites(c)
	second, err := s.Ensure(ctx, "node-1", ip, moved)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Errorf("ClusterIP changed from %v to %v", first, second)
	}
	if got := writes(); got != 2 {
		t.Errorf("%d writes, want 2 (the Service and the slice updated): %v", got, c.Actions())
	}
	want := "iperf3-tcp 15201/TCP,iperf3-udp 15201/UDP,qperf 19765/TCP,qperf-data-tcp 19766/TCP,qperf-data-udp 19766/UDP,probe-echo 17947/TCP"
	var svcPorts, slicePorts []Port
	for _, p := range getService(t, c, "meshperf-ep-node-1").Spec.Ports {
		if p.TargetPort.IntVal != p.Port {
			t.Errorf("Service port %s targets %s, want %d", p.Name, p.TargetPort.String(), p.Port)
		}
		svcPorts = append(svcPorts, Port{Name: p.Name, Port: p.Port, Protocol: p.Protocol})
	}
	for _, p := range getSlice(t, c, "meshperf-ep-node-1").Ports {
		slicePorts = append(slicePorts, Port{Name: *p.Name, Port: *p.Port, Protocol: *p.Protocol})
	}
	if got := portStrings(svcPorts); got != want {
		t.Errorf("Service ports\n got %s\nwant %s", got, want)
	}
	if got := portStrings(slicePorts); got != want {
		t.Errorf("slice ports\n got %s\nwant %s", got, want)
	}

	writes = countWrites(c)
	_, err = s.Ensure(ctx, "node-1", ip, protocol.ServerPorts{Iperf3: 8080, Qperf: 19765, QperfData: 19766, HTTP: 8080})
	if err == nil || !strings.Contains(err.Error(), `kube: node "node-1": iperf3_port and http_port are both 8080`) {
		t.Errorf("colliding ports: error %v", err)
	}
	if got := writes(); got != 0 {
		t.Errorf("colliding ports: %d writes, want 0: %v", got, c.Actions())
	}
}
