package registry

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the test server ports a node registers: their checks,
// the ports in force that Endpoints carry, and the check of a
// ServerStarted answer against them.

// checkServerPorts checks the iperf3 and qperf ports of a Register into
// n, with the defaults for 0, and that no two of n's server ports
// (checkProbeRegistration's http_port and probe_port too) are the same.
func checkServerPorts(reg *agentv1.Register, n *Node) error {
	for _, p := range []struct {
		field string
		v     uint32
		def   uint16
		slot  *uint16
	}{
		{"iperf3_port", reg.GetIperf3Port(), protocol.DefaultIperf3Port, &n.Iperf3Port},
		{"qperf_port", reg.GetQperfPort(), protocol.DefaultQperfPort, &n.QperfPort},
		{"qperf_data_port", reg.GetQperfDataPort(), protocol.DefaultQperfDataPort, &n.QperfDataPort},
	} {
		if p.v > 65535 {
			return fmt.Errorf("%s %d is not a port (0 or 1..65535)", p.field, p.v)
		}
		*p.slot = uint16(p.v)
		if p.v == 0 {
			*p.slot = p.def
		}
	}
	if err := n.serverPorts().Check(); err != nil {
		return fmt.Errorf("%w (a port of 0 is the default: iperf3_port %d, qperf_port %d, qperf_data_port %d)", err,
			protocol.DefaultIperf3Port, protocol.DefaultQperfPort, protocol.DefaultQperfDataPort)
	}
	return nil
}

// serverPorts are the ports of n's test servers.
func (n Node) serverPorts() protocol.ServerPorts {
	return protocol.ServerPorts{Iperf3: n.Iperf3Port, Qperf: n.QperfPort, QperfData: n.QperfDataPort, HTTP: n.HTTPPort, Probe: n.ProbePort}
}

// defaultPorts reports whether n's iperf3 and qperf ports are the
// defaults, which an agent assumes for a peer its probe plan names and no
// Endpoints lists (a probe plan carries no server ports).
func (n Node) defaultPorts() bool {
	return n.Iperf3Port == protocol.DefaultIperf3Port && n.QperfPort == protocol.DefaultQperfPort && n.QperfDataPort == protocol.DefaultQperfDataPort
}

// nodeEndpoint is n as Endpoints carry it, with its addresses as a
// registered them and its ports in force.
func nodeEndpoint(n Node, addrs []*measurev1.NetworkAddress, serviceIP string) *agentv1.NodeEndpoint {
	var serviceIPv6 string
	if ip := n.ServiceAddr(measurev1.IPFamily_IP_FAMILY_IPV6); ip.IsValid() {
		serviceIPv6 = ip.String()
		if serviceIP == serviceIPv6 { // an IPv6-only node: its ClusterIP goes where the proto says
			serviceIP = ""
		}
	}
	return &agentv1.NodeEndpoint{NodeName: n.Name, Addresses: addrs, ServiceIp: serviceIP, ServiceIpv6: serviceIPv6,
		Iperf3Port: uint32(n.Iperf3Port), QperfPort: uint32(n.QperfPort), QperfDataPort: uint32(n.QperfDataPort), HttpPort: uint32(n.HTTPPort)}
}

// CheckServerStarted checks a ServerStarted answer of node n for tool
// against the ports n registered: iperf3's port, qperf's port and data
// port, the HTTP target's port (curl, ab). The error names the node, the tool
// and the port.
func CheckServerStarted(n Node, tool measurev1.Tool, st *agentv1.ServerStarted) error {
	type want struct {
		field      string
		got, wants uint32
	}
	var ws []want
	switch tool {
	case measurev1.Tool_TOOL_IPERF3:
		ws = []want{{"port", st.GetPort(), uint32(n.Iperf3Port)}, {"data_port", st.GetDataPort(), 0}}
	case measurev1.Tool_TOOL_QPERF:
		ws = []want{{"port", st.GetPort(), uint32(n.QperfPort)}, {"data_port", st.GetDataPort(), uint32(n.QperfDataPort)}}
	case measurev1.Tool_TOOL_CURL, measurev1.Tool_TOOL_AB:
		if n.HTTPPort == 0 {
			return fmt.Errorf("node %q registered no http_port: it has no HTTP target to test", n.Name)
		}
		ws = []want{{"port", st.GetPort(), uint32(n.HTTPPort)}, {"data_port", st.GetDataPort(), 0}}
	default:
		return fmt.Errorf("tool %v runs no server", tool)
	}
	for _, w := range ws {
		if w.got != w.wants {
			return fmt.Errorf("node %q answered ServerStarted for %s with %s %d; it registered %d", n.Name, testspec.ToolName(tool), w.field, w.got, w.wants)
		}
	}
	return nil
}
