package protocol

// The agents' default server ports (cmd/agent's flags): what a
// Register's iperf3_port, qperf_port and qperf_data_port of 0 mean, and
// the ports a node's Service (coordinator/kube) carries to its pod, so
// that a service path reaches every server an agent runs by default.
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
)
