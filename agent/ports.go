package agent

import (
	"fmt"
	"net/netip"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the server ports of the registered endpoints: a client
// runs to an endpoint only on the port that endpoint's node registered
// for the test's tool.

// serverPorts are the ports a node registered for its test servers; zero
// HTTP means it has no HTTP target.
type serverPorts struct {
	node                           string
	iperf3, qperf, qperfData, http uint32
}

// defaultPorts are the ports of a probe plan's peer that no Endpoints
// lists: a plan carries the HTTP port but no server ports, and the
// coordinator lists in Endpoints every node whose iperf3 or qperf ports
// are not the defaults.
func defaultPorts(node string, http uint32) serverPorts {
	return serverPorts{node: node, iperf3: protocol.DefaultIperf3Port, qperf: protocol.DefaultQperfPort, qperfData: protocol.DefaultQperfDataPort, http: http}
}

// endpointPorts maps each address of ep's nodes (host, pod and service
// IP: a service IP takes the ports of the node whose pod it fronts) to
// the node's ports; a zero iperf3 or qperf port (a coordinator that sends
// none) means the default.
func endpointPorts(ep *agentv1.Endpoints) map[netip.Addr]serverPorts {
	out := map[netip.Addr]serverPorts{}
	for _, n := range ep.GetNodes() {
		p := defaultPorts(n.GetNodeName(), n.GetHttpPort())
		if v := n.GetIperf3Port(); v != 0 {
			p.iperf3 = v
		}
		if v := n.GetQperfPort(); v != 0 {
			p.qperf = v
		}
		if v := n.GetQperfDataPort(); v != 0 {
			p.qperfData = v
		}
		ips := []string{n.GetServiceIp(), n.GetServiceIpv6()}
		for _, a := range n.GetAddresses() {
			ips = append(ips, a.GetIp())
		}
		for _, s := range ips {
			if ip, err := protocol.ParseEndpointIP(s); err == nil {
				out[ip] = p
			}
		}
	}
	return out
}

// planPorts maps each address of the plan's peers to its ports.
func planPorts(peers map[string]planPeer) map[netip.Addr]serverPorts {
	out := map[netip.Addr]serverPorts{}
	for name, pp := range peers {
		for _, ip := range pp.addrs {
			if ip.IsValid() {
				out[ip] = defaultPorts(name, pp.http)
			}
		}
	}
	return out
}

// checkPort refuses a client to a registered endpoint on another port
// than the one the endpoint's node registered for the test's tool
// (iperf3: iperf3_port; qperf: qperf_port and qperf_data_port as data
// port; HTTP: http_port). A target that is no registered endpoint (one
// of --allow-target's CIDRs) and ping are not checked. The error names
// the field, the value and the node.
func (t *targets) checkPort(target netip.Addr, rc *agentv1.RunClient) error {
	t.mu.RLock()
	p, ok := t.ports[target]
	if !ok {
		p, ok = t.planPorts[target]
	}
	t.mu.RUnlock()
	if !ok {
		return nil
	}
	type want struct {
		field      string
		got, wants uint32
	}
	var ws []want
	tool := testspec.Tool(rc.GetSpec().GetTest())
	switch tool {
	case measurev1.Tool_TOOL_PING:
		return nil
	case measurev1.Tool_TOOL_IPERF3:
		ws = []want{{"port", rc.GetPort(), p.iperf3}}
	case measurev1.Tool_TOOL_QPERF:
		ws = []want{{"port", rc.GetPort(), p.qperf}, {"data_port", rc.GetDataPort(), p.qperfData}}
	case measurev1.Tool_TOOL_CURL, measurev1.Tool_TOOL_AB:
		// curl and ab (http_load) reach only the HTTP target.
		if p.http == 0 {
			return fmt.Errorf("target_ip %s: node %q registered no HTTP target (http_port 0)", target, p.node)
		}
		ws = []want{{"port", rc.GetPort(), p.http}}
	default:
		return fmt.Errorf("test %v has no tool", rc.GetSpec().GetTest())
	}
	for _, w := range ws {
		if w.got != w.wants {
			return fmt.Errorf("%s %d refused: node %q (target_ip %s) registered %d for %s", w.field, w.got, p.node, target, w.wants, testspec.Name(rc.GetSpec().GetTest()))
		}
	}
	return nil
}
