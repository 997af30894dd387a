package runner

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The tool cases of issue 11 ("And tools lie too") through the real
// runner: Run starts a process (proc.Run: process group, output capture,
// exit status), and the parser reads what it printed. The tool is a
// shell script in t.TempDir() (Config.ToolDir) that prints a capture of
// testdata/ byte for byte and exits with its status; it records its argv,
// so a test cannot pass on the real tool's output by mistake.

// fakeTool writes dir/name: a script that prints version for -V and
// --version, and else records its argv in dir/name.argv, prints the
// capture c (testdata/TOOL/CASE.txt) and exits with its exit status.
func fakeTool(t *testing.T, dir, name, version string, c capture) {
	t.Helper()
	base := filepath.Join(dir, name)
	for ext, b := range map[string][]byte{".stdout": c.out.Stdout, ".stderr": c.out.Stderr} {
		if err := os.WriteFile(base+ext, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if c.out.ExitCode < 0 || c.out.ExitCode > 255 {
		t.Fatalf("exit %d cannot be a script's", c.out.ExitCode)
	}
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in -V|--version) echo '%s'; exit 0;; esac
printf '%%s\n' "$*" >'%s.argv'
cat '%s.stdout'
cat '%s.stderr' >&2
exit %d
`, version, base, base, base, c.out.ExitCode)
	if err := os.WriteFile(base, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// toolNames are the programs and the version lines their scripts print.
var toolNames = map[measurev1.Tool][2]string{
	measurev1.Tool_TOOL_PING:   {"ping", "ping from iputils 20221126"},
	measurev1.Tool_TOOL_QPERF:  {"qperf", "qperf 0.4.11"},
	measurev1.Tool_TOOL_IPERF3: {"iperf3", "iperf 3.12 (cJSON 1.7.15)"},
	measurev1.Tool_TOOL_CURL:   {"curl", "curl 7.88.1 (x86_64-pc-linux-gnu)"},
}

func TestToolCasesThroughRunner(t *testing.T) {
	ping := func(f func(*testing.T, *measurev1.PingMetrics)) func(*testing.T, *measurev1.Result) {
		return func(t *testing.T, r *measurev1.Result) { f(t, r.GetPing()) }
	}
	tests := []struct {
		name    string
		capture string // testdata/<capture>.txt
		want    measurev1.Status
		words   []string // in the message
		check   func(*testing.T, *measurev1.Result)
	}{
		// 1. Replies from another address.
		{"ping every reply from another address", "ping/foreign_all", measurev1.Status_STATUS_UNREACHABLE,
			[]string{"0/3 echo replies from 127.0.0.1", "127.0.0.9 x3"}, nil},
		{"ping every reply twice from another address", "ping/foreign_dup_all", measurev1.Status_STATUS_UNREACHABLE,
			[]string{"0/4 echo replies from 127.0.0.1", "127.0.0.9 x7"}, nil},
		{"ping half the replies from another address", "ping/foreign_some", measurev1.Status_STATUS_OK,
			[]string{"3 echo replies came from other addresses than 127.0.0.1", "127.0.0.9 x3"},
			ping(func(t *testing.T, m *measurev1.PingMetrics) {
				if m.GetPacketsTransmitted() != 6 || m.GetPacketsReceived() != 3 || m.GetLossRatio() != 0.5 || m.GetRttMaxSeconds() != 78e-6 {
					t.Errorf("metrics %v: want 3 of 6 received from the target, loss 0.5, rtt max 0.078 ms (the target's)", m)
				}
			})},
		{"ping another address first, then the target's DUP!", "ping/derived_foreign_then_target_dup", measurev1.Status_STATUS_OK,
			[]string{"4 echo replies came from other addresses"},
			ping(func(t *testing.T, m *measurev1.PingMetrics) {
				if m.GetPacketsReceived() != 3 || m.GetDuplicates() != 0 || m.GetLossRatio() != 0.5 {
					t.Errorf("metrics %v: want 3 received (the DUP! from the target counts once), no duplicates", m)
				}
			})},
		// 2. curl timings that cannot be true.
		{"curl time_connect far beyond --max-time", "curl/derived_connect_beyond_max_time", measurev1.Status_STATUS_PARSE_ERROR,
			[]string{"time_connect = 4294.967296", "--max-time 2"}, nil},
		{"curl time_connect before time_namelookup", "curl/derived_connect_before_namelookup", measurev1.Status_STATUS_PARSE_ERROR,
			[]string{"time_connect = 0.000010 is before time_namelookup = 0.000065"}, nil},
		{"curl time_total before time_starttransfer", "curl/derived_total_before_starttransfer", measurev1.Status_STATUS_PARSE_ERROR,
			[]string{"time_total = 0.010000 is before time_starttransfer = 0.010510"}, nil},
		// 3. iperf3 UDP receiver bytes 0, packets say most arrived.
		{"iperf3 UDP receiver bytes 0, packets arrived", "iperf3/derived_udp_receiver_bytes_zero", measurev1.Status_STATUS_OK,
			[]string{"end.sum_received.bytes = 0", "7764 datagrams arrived", "estimated", "not an outage"},
			func(t *testing.T, r *measurev1.Result) {
				m := r.GetIperf3()
				if m.GetLostPackets() != 863 || m.GetPackets() != 8627 || math.Abs(m.GetLossRatio()-863.0/8627) > 1e-12 ||
					m.GetBytesReceived() != 7764*1448 || !(m.GetThroughputBps() > 0) {
					t.Errorf("metrics %v: want loss 863/8627, 7764 x 1448 bytes received", m)
				}
			}},
		{"iperf3 UDP every datagram lost", "iperf3/derived_udp_all_lost", measurev1.Status_STATUS_UNREACHABLE,
			[]string{"lost_packets = 8627 of packets = 8627"}, nil},
		// 4. ping's own send errors.
		{"ping every send failed locally", "ping/send_failed_all", measurev1.Status_STATUS_TOOL_ERROR,
			[]string{"all 3 echo requests failed to leave this host", "ping: sendmsg: Operation not permitted"}, nil},
		{"ping some sends failed locally", "ping/send_failed_some", measurev1.Status_STATUS_OK,
			[]string{"3 of 6 echo requests failed to leave this host", "Operation not permitted", "not counted as loss"},
			ping(func(t *testing.T, m *measurev1.PingMetrics) {
				if m.GetPacketsTransmitted() != 3 || m.GetPacketsReceived() != 3 || m.GetLossRatio() != 0 {
					t.Errorf("metrics %v: want 3 sent, 3 received, no loss", m)
				}
			})},
		// A route that went away during the run is the path failing, not
		// a local policy: those sends count as lost, printed or not.
		{"ping route gone, sends named on stderr", "ping/derived_route_gone_printed", measurev1.Status_STATUS_OK,
			[]string{"2 of 6 echo requests found no route from this host", "Network is unreachable", "counted as lost"},
			ping(func(t *testing.T, m *measurev1.PingMetrics) {
				if m.GetPacketsTransmitted() != 6 || m.GetPacketsReceived() != 4 || math.Abs(m.GetLossRatio()-2.0/6) > 1e-12 {
					t.Errorf("metrics %v: want 6 sent, 4 received, loss 2/6", m)
				}
			})},
		{"ping route gone, silent (iputils 20221126)", "ping/route_gone_all", measurev1.Status_STATUS_OK, nil,
			ping(func(t *testing.T, m *measurev1.PingMetrics) {
				if m.GetPacketsTransmitted() != 6 || m.GetPacketsReceived() != 2 || math.Abs(m.GetLossRatio()-4.0/6) > 1e-12 {
					t.Errorf("metrics %v: want 6 sent, 2 received, loss 4/6", m)
				}
			})},
		{"ping more send errors than unanswered probes", "ping/derived_send_errors_above_sent", measurev1.Status_STATUS_PARSE_ERROR,
			[]string{"3 replies but only 2 of 6 echo requests left this host"}, nil},
		// 5. A complete result, then an error and a non-zero exit.
		{"ping complete, then exit 2", "ping/derived_complete_then_error", measurev1.Status_STATUS_OK,
			[]string{"ping exited 2 after a complete result: ping: recvmsg: Invalid argument"},
			ping(func(t *testing.T, m *measurev1.PingMetrics) {
				if m.GetPacketsReceived() != 5 {
					t.Errorf("metrics %v: want the figures kept", m)
				}
			})},
		{"iperf3 complete, then exit 1", "iperf3/derived_complete_then_error", measurev1.Status_STATUS_OK,
			[]string{"iperf3 exited 1 after a complete result: iperf3: error - control socket has closed unexpectedly"},
			func(t *testing.T, r *measurev1.Result) {
				if r.GetIperf3().GetBytesReceived() != 2589720470 {
					t.Errorf("metrics %v: want the figures kept", r.GetIperf3())
				}
			}},
		{"qperf complete, then exit 1", "qperf/derived_complete_then_error", measurev1.Status_STATUS_OK,
			[]string{"qperf exited 1 after a complete result: qperf: failed to receive results: Connection reset by peer"},
			func(t *testing.T, r *measurev1.Result) {
				if r.GetQperf().GetLatencySeconds() != 12.5e-6 {
					t.Errorf("metrics %v: want the figures kept", r.GetQperf())
				}
			}},
		// A clean run stays clean: no message.
		{"ping clean", "ping/ok_loopback", measurev1.Status_STATUS_OK, nil, nil},
		{"iperf3 UDP clean", "iperf3/udp_loss", measurev1.Status_STATUS_OK, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := readCapture(t, filepath.Join("testdata", tt.capture+".txt"))
			tool := toolNames[toolOf(c.spec)]
			dir := t.TempDir()
			fakeTool(t, dir, tool[0], tool[1], c)
			r := New(Config{ToolDir: dir})
			req := &agentv1.RunClient{Spec: c.spec, Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1", Port: 30801, DataPort: 30802}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got := r.Run(ctx, req)
			checkResults(t, c.spec, got)
			if _, err := os.Stat(filepath.Join(dir, tool[0]+".argv")); err != nil {
				t.Fatalf("the script did not run: %v (results %v)", err, got)
			}
			res := got[0]
			if res.GetStatus() != tt.want {
				t.Fatalf("status %v, want %v; message %q", res.GetStatus(), tt.want, res.GetMessage())
			}
			for _, w := range tt.words {
				if !strings.Contains(res.GetMessage(), w) {
					t.Errorf("message %q does not say %q", res.GetMessage(), w)
				}
			}
			if tt.words == nil && res.GetMessage() != "" {
				t.Errorf("clean run with message %q", res.GetMessage())
			}
			if want := strings.SplitN(tool[1], " (", 2)[0]; res.GetToolVersion() != want {
				t.Errorf("tool_version %q, want the script's %q", res.GetToolVersion(), want)
			}
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

func toolOf(spec *measurev1.TestSpec) measurev1.Tool {
	switch spec.GetTest() {
	case measurev1.Test_TEST_PING:
		return measurev1.Tool_TOOL_PING
	case measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_IPERF3_UDP:
		return measurev1.Tool_TOOL_IPERF3
	case measurev1.Test_TEST_HTTP:
		return measurev1.Tool_TOOL_CURL
	}
	return measurev1.Tool_TOOL_QPERF
}

// TestToolDir checks Config.ToolDir: a tool in the directory is run by
// its path (version command too), one that is absent there, or not
// executable, is looked up in PATH.
func TestToolDir(t *testing.T) {
	dir := t.TempDir()
	fakeTool(t, dir, "ping", "ping from a script 1", capture{})
	if err := os.WriteFile(filepath.Join(dir, "curl"), []byte("#!/bin/sh\necho not me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(Config{ToolDir: dir})
	if got, want := r.toolPath("ping"), filepath.Join(dir, "ping"); got != want {
		t.Errorf("toolPath(ping) = %q, want %q", got, want)
	}
	for _, name := range []string{"curl", "iperf3", "/bin/ping"} {
		if got := r.toolPath(name); got != name {
			t.Errorf("toolPath(%s) = %q, want it unchanged (PATH)", name, got)
		}
	}
	if got := New(Config{}).toolPath("ping"); got != "ping" {
		t.Errorf("without ToolDir: toolPath(ping) = %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, info := range r.Tools(ctx) {
		if info.GetTool() == measurev1.Tool_TOOL_PING && info.GetVersion() != "ping from a script 1" {
			t.Errorf("ping version %q, want the script's", info.GetVersion())
		}
	}
}
