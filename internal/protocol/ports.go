package protocol

// The agents' default test server ports: what a Register's iperf3_port,
// qperf_port and qperf_data_port of 0 mean.
const (
	// DefaultIperf3Port is iperf3's listen port (TCP control and data,
	// UDP data).
	DefaultIperf3Port = 5201
	// DefaultQperfPort is qperf's listen port.
	DefaultQperfPort = 19765
	// DefaultQperfDataPort is qperf's pinned data port.
	DefaultQperfDataPort = 19766
)
