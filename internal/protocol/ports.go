package protocol

import "fmt"

// The agents' default server ports (cmd/agent's flags): what a
// Register's iperf3_port, qperf_port and qperf_data_port of 0 mean. A
// node's Service (coordinator/kube) carries the ports its agent
// registered (ServerPorts), these for an agent on the defaults.
const (
	// DefaultIperf3Port is iperf3's listen port (TCP control and data,
	// UDP data).
	DefaultIperf3Port = 5201
	// DefaultQperfPort is qperf's listen port (TCP).
	DefaultQperfPort = 19765
	// DefaultQperfDataPort is qperf's pinned data port (TCP and UDP).
	DefaultQperfDataPort = 19766
	// DefaultHTTPPort is the agent's HTTP target's port (TCP), the target
	// of curl and ab tests and of the http probes.
	DefaultHTTPPort = 8080
	// DefaultProbePort is the TCP echo responder's port, the target of the
	// tcp probes of the continuous mesh.
	DefaultProbePort = 7947
	// DefaultGossipPort is the agents' memberlist gossip port (UDP and
	// TCP) on their host IPs, memberlist's own default.
	DefaultGossipPort = 7946
)

// ServerPorts are the ports of one agent's test servers, the same on its
// host and pod networks, as the coordinator holds them after a Register:
// Iperf3, Qperf and QperfData always set (a Register's 0 is the default
// port), HTTP and Probe zero when the agent registered none (it runs no
// HTTP target, or no probe plans). A node's Service (coordinator/kube)
// carries exactly these ports, so that a service path reaches the servers
// the agent runs.
type ServerPorts struct {
	// Iperf3 is the iperf3 servers' port (TCP control and data, UDP data):
	// a Register's iperf3_port.
	Iperf3 uint16
	// Qperf is the qperf servers' listen port (TCP): qperf_port.
	Qperf uint16
	// QperfData is the qperf servers' pinned data port (TCP and UDP):
	// qperf_data_port.
	QperfData uint16
	// HTTP is the HTTP target's port (TCP): http_port; 0 for none.
	HTTP uint16
	// Probe is the TCP echo responder's port: probe_port; 0 for none.
	Probe uint16
}

// Check reports two servers on one port: every server takes its port on
// TCP, so two non-zero fields of one value cannot both be served. The
// error names both Register fields and the port.
func (p ServerPorts) Check() error {
	fs := []struct {
		field string
		port  uint16
	}{{"iperf3_port", p.Iperf3}, {"qperf_port", p.Qperf}, {"qperf_data_port", p.QperfData}, {"http_port", p.HTTP}, {"probe_port", p.Probe}}
	for i, f := range fs {
		for _, g := range fs[:i] {
			if f.port != 0 && f.port == g.port {
				return fmt.Errorf("%s and %s are both %d; each server needs its own port", g.field, f.field, f.port)
			}
		}
	}
	return nil
}
