package runner

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestRunExternalServers: iperf3 and qperf to a server behind an external
// target run against its resolved address on the allowlisted ports
// (captured iperf3 3.12 and qperf 0.4.11 outputs, testdata/), and a busy
// iperf3 server is STATUS_BUSY.
func TestRunExternalServers(t *testing.T) {
	srv := External{Name: "srv", IP: netip.MustParseAddr("192.0.2.9"), Iperf3Port: 15201, QperfPort: 29765, QperfDataPort: 29766}
	tests := []struct {
		capture        string
		port, dataPort uint32
		wantArgv       string // the argv after the tool's path
		wantStatus     measurev1.Status
	}{
		{"iperf3/tcp_ok.txt", 15201, 0, "-c 192.0.2.9 -p 15201 -J -i 0 -t", measurev1.Status_STATUS_OK},
		{"iperf3/busy.txt", 15201, 0, "-c 192.0.2.9 -p 15201 -J -i 0 -t", measurev1.Status_STATUS_BUSY},
		{"qperf/tcp_bw_ok.txt", 29765, 29766, "-lp 29765 -ip 29766 -t", measurev1.Status_STATUS_OK},
		{"qperf/tcp_lat_ok.txt", 29765, 29766, "-lp 29765 -ip 29766 -t", measurev1.Status_STATUS_OK},
	}
	for _, tt := range tests {
		t.Run(tt.capture, func(t *testing.T) {
			c := readCapture(t, filepath.Join("testdata", tt.capture))
			r := fakeRunner(Config{}, &measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_IPERF3, Version: "iperf 3.12"},
				&measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_QPERF, Version: "qperf 0.4.11"})
			var cmds []proc.Command
			r.exec = func(_ context.Context, cmd proc.Command) (proc.Output, error) {
				cmds = append(cmds, cmd)
				return c.out, c.runErr
			}
			req := &agentv1.RunClient{Spec: c.spec, Network: measurev1.Network_NETWORK_HOST, ExternalTarget: "srv", Port: tt.port, DataPort: tt.dataPort}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := r.RunExternal(ctx, req, srv)
			if len(got) != 1 || got[0].GetStatus() != tt.wantStatus || got[0].GetTargetAddress() != "192.0.2.9" {
				t.Fatalf("results %v, want one %v to 192.0.2.9", got, tt.wantStatus)
			}
			if len(cmds) != 1 {
				t.Fatalf("commands %v, want one", cmds)
			}
			argv := strings.Join(cmds[0].Args, " ")
			if !strings.HasPrefix(argv, tt.wantArgv) {
				t.Errorf("argv %q, want it to start with %q", argv, tt.wantArgv)
			}
			if strings.Contains(tt.capture, "qperf") && !strings.Contains(argv, " 192.0.2.9 tcp_") {
				t.Errorf("argv %q: qperf not sent to the resolved address", argv)
			}
			checkResults(t, req.GetSpec(), got)
		})
	}
}

// FuzzCheckExternal: whatever the request, CheckExternal accepts only the
// allowlisted ports of the target's server for the test's tool (none for
// ping and HTTP), and refuses with STATUS_INVALID.
func FuzzCheckExternal(f *testing.F) {
	f.Add(uint8(6), uint32(5201), uint32(0), uint32(5201), uint32(19765), uint32(19766))
	f.Add(uint8(2), uint32(19765), uint32(19766), uint32(5201), uint32(19765), uint32(19766))
	f.Add(uint8(2), uint32(19765), uint32(5201), uint32(5201), uint32(19765), uint32(19766))
	f.Add(uint8(6), uint32(22), uint32(0), uint32(5201), uint32(0), uint32(0))
	f.Add(uint8(1), uint32(0), uint32(0), uint32(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, test uint8, port, dataPort, iperf3Port, qperfPort, qperfData uint32) {
		e := &measurev1.ExternalTarget{Name: "srv", HttpUrl: "http://srv.example/", Iperf3Port: iperf3Port, QperfPort: qperfPort, QperfDataPort: qperfData}
		tt := measurev1.Test(test % 12)
		req := &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: tt}, ExternalTarget: "srv", Port: port, DataPort: dataPort}
		err := CheckExternal(req, e)
		if err != nil {
			if f := asFailure(err); f.Status != measurev1.Status_STATUS_INVALID {
				t.Fatalf("refusal %v with status %v", err, f.Status)
			}
			return
		}
		switch testspec.Tool(tt) {
		case measurev1.Tool_TOOL_PING, measurev1.Tool_TOOL_CURL:
			if port != 0 || dataPort != 0 {
				t.Fatalf("%v accepted with ports %d %d", tt, port, dataPort)
			}
		case measurev1.Tool_TOOL_IPERF3:
			if port == 0 || port != iperf3Port || dataPort != 0 {
				t.Fatalf("%v accepted with ports %d %d, target's iperf3_port %d", tt, port, dataPort, iperf3Port)
			}
		case measurev1.Tool_TOOL_QPERF:
			if port == 0 || dataPort == 0 || port != qperfPort || dataPort != qperfData {
				t.Fatalf("%v accepted with ports %d %d, target's %d %d", tt, port, dataPort, qperfPort, qperfData)
			}
		default:
			t.Fatalf("%v accepted against an external target", tt)
		}
	})
}
