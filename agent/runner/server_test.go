package runner

import (
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestServerPort: ServerPort reads back what ServerCommand writes, and
// nothing else.
func TestServerPort(t *testing.T) {
	for _, tc := range []struct {
		tool           measurev1.Tool
		port, dataPort uint32
	}{{measurev1.Tool_TOOL_IPERF3, 5201, 0}, {measurev1.Tool_TOOL_QPERF, 19765, 19766}, {measurev1.Tool_TOOL_IPERF3, 65535, 0}} {
		c, err := ServerCommand(tc.tool, tc.port, tc.dataPort, "")
		if err != nil {
			t.Fatal(err)
		}
		if tool, port, ok := ServerPort(append([]string{"/usr/bin/" + c.Name}, c.Args...)); !ok || tool != tc.tool || port != tc.port {
			t.Errorf("ServerPort(%s %v) = %v, %d, %v; want %v, %d", c.Name, c.Args, tool, port, ok, tc.tool, tc.port)
		}
	}
	for _, argv := range [][]string{
		nil,
		{"iperf3", "-c", "10.0.0.1", "-p", "5201"}, // a client
		{"iperf3", "-s"}, // no port
		{"qperf"},
		{"qperf", "-lp", "0"},
		{"qperf", "-lp", "019765"},
		{"qperf", "-lp", "70000"},
		{"nc", "-l", "-p", "5201"},
		{"iperf3-s", "-s", "-p", "5201"},
	} {
		if tool, port, ok := ServerPort(argv); ok {
			t.Errorf("ServerPort(%q) = %v, %d; want none", argv, tool, port)
		}
	}
}
