package runner

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The integration tests run the real tools against 127.0.0.1 only, with
// servers started through ServerCommand and proc.Start on ports the kernel
// picked, and stopped (process group killed) when the test ends.

// listening reports whether something listens on TCP port, from
// /proc/net/tcp (a dial would count as a test for iperf3's one-off server).
func listening(port uint32) bool {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && fields[3] == "0A" && strings.HasSuffix(fields[1], fmt.Sprintf(":%04X", port)) {
				_ = f.Close()
				return true
			}
		}
		_ = f.Close()
	}
	return false
}

// startServer starts tool's server and stops it when the test ends.
func startServer(t *testing.T, tool measurev1.Tool, port, dataPort uint32) {
	t.Helper()
	cmd, err := ServerCommand(tool, port, dataPort, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p, err := proc.Start(ctx, cmd)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		cancel()
	})
	deadline := time.Now().Add(5 * time.Second)
	for !listening(port) {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %d: %+v", cmd, port, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func inRange(t *testing.T, what string, x, lo, hi float64) {
	t.Helper()
	if !(x > lo && x < hi) {
		t.Errorf("%s = %v, want in (%v, %v)", what, x, lo, hi)
	}
}

// Bounds of loopback figures, narrow enough that a unit slip shows: a
// round trip or a latency of 1 µs to 20 ms (milliseconds stored as
// seconds would be 1,000 times too large, microseconds as seconds a
// million), a throughput of 10 Mbit/s to 1 Tbit/s (bytes for bits, kbit/s
// or Gbit/s for bit/s fall outside).
const (
	loRTT, hiRTT = 1e-6, 20e-3
	loBps, hiBps = 1e7, 1e12
)

func TestIntegration(t *testing.T) {
	testnet.Need(t, "ping", "qperf", "iperf3", "curl")
	r := New(Config{NetNS: map[measurev1.Network]string{
		// The test's own namespace, entered through nsenter like a pod's.
		measurev1.Network_NETWORK_POD: fmt.Sprintf("/proc/%d/ns/net", os.Getpid()),
	}})
	secs := durationpb.New
	qperfSpec := func(test measurev1.Test, sizes ...uint64) *measurev1.TestSpec {
		return &measurev1.TestSpec{Test: test, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: secs(time.Second), MsgSizeBytes: sizes}}}
	}
	iperf3Spec := func(test measurev1.Test, bps uint64) *measurev1.TestSpec {
		return &measurev1.TestSpec{Test: test, Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: secs(time.Second), UdpTargetBps: bps}}}
	}
	tests := []struct {
		name    string
		network measurev1.Network
		spec    *measurev1.TestSpec
		server  measurev1.Tool // TOOL_UNSPECIFIED: none
		http    bool           // an httptest server as the target
		want    measurev1.Status
		check   func(t *testing.T, r *measurev1.Result)
	}{
		{name: "ping", spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: 3}}},
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				m := r.GetPing()
				if m.GetPacketsTransmitted() != 3 {
					t.Errorf("transmitted = %d, want 3", m.GetPacketsTransmitted())
				}
				inRange(t, "rtt_avg_seconds", m.GetRttAvgSeconds(), loRTT, hiRTT)
				inRange(t, "rtt_median_seconds", m.GetRttMedianSeconds(), loRTT, hiRTT)
				if m.GetLossRatio() < 0 || m.GetLossRatio() > 1 {
					t.Errorf("loss_ratio = %v", m.GetLossRatio())
				}
			}},
		{name: "ping in a namespace", network: measurev1.Network_NETWORK_POD, spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: 2}}},
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				inRange(t, "rtt_avg_seconds", r.GetPing().GetRttAvgSeconds(), loRTT, hiRTT)
				inRange(t, "rtt_median_seconds", r.GetPing().GetRttMedianSeconds(), loRTT, hiRTT)
			}},
		{name: "qperf tcp_lat", spec: qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, 1, 1024), server: measurev1.Tool_TOOL_QPERF,
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				inRange(t, "latency_seconds", r.GetQperf().GetLatencySeconds(), loRTT, hiRTT)
			}},
		{name: "qperf tcp_bw", spec: qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, 1024, 65536), server: measurev1.Tool_TOOL_QPERF,
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				inRange(t, "throughput_bps", r.GetQperf().GetThroughputBps(), loBps, hiBps)
			}},
		{name: "iperf3 tcp", spec: iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, 0), server: measurev1.Tool_TOOL_IPERF3,
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				m := r.GetIperf3()
				inRange(t, "throughput_bps", m.GetThroughputBps(), loBps, hiBps)
				inRange(t, "sender_throughput_bps", m.GetSenderThroughputBps(), loBps, hiBps)
				inRange(t, "duration_seconds", m.GetDurationSeconds(), 0.5, 10)
				if m.GetBytesReceived() == 0 || m.GetTcpMssBytes() == 0 {
					t.Errorf("bytes_received %d, tcp_mss_bytes %d", m.GetBytesReceived(), m.GetTcpMssBytes())
				}
			}},
		{name: "iperf3 udp", spec: iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, 100_000_000), server: measurev1.Tool_TOOL_IPERF3,
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				m := r.GetIperf3()
				// Asked for 100 Mbit/s: what arrives of it.
				inRange(t, "throughput_bps", m.GetThroughputBps(), 1e7, 1.1e8)
				if m.GetPackets() == 0 || m.GetLossRatio() < 0 || m.GetLossRatio() > 1 || m.GetJitterSeconds() < 0 {
					t.Errorf("packets %d, loss_ratio %v, jitter %v", m.GetPackets(), m.GetLossRatio(), m.GetJitterSeconds())
				}
			}},
		{name: "http", spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, http: true,
			want: measurev1.Status_STATUS_OK, check: func(t *testing.T, r *measurev1.Result) {
				m := r.GetHttp()
				if m.GetHttpCode() != 200 || m.GetSizeDownloadBytes() != 3 {
					t.Errorf("http_code %d, size %d", m.GetHttpCode(), m.GetSizeDownloadBytes())
				}
				inRange(t, "total_seconds", m.GetTotalSeconds(), loRTT, 1)
			}},
		{name: "iperf3 refused", spec: iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, 0), want: measurev1.Status_STATUS_REFUSED},
		{name: "http refused", spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, want: measurev1.Status_STATUS_REFUSED},
		// qperf says only "failed to connect" (after 5 s); the probe, run in
		// the namespace like the tool, finds the refusal.
		{name: "qperf refused", network: measurev1.Network_NETWORK_POD, spec: qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, 1, 64),
			want: measurev1.Status_STATUS_REFUSED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.network == measurev1.Network_NETWORK_POD && os.Geteuid() != 0 {
				t.Skip("needs root: nsenter into the pod namespace")
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req := &agentv1.RunClient{Spec: tt.spec, Network: tt.network, TargetIp: "127.0.0.1"}
			if req.Network == measurev1.Network_NETWORK_UNSPECIFIED {
				req.Network = measurev1.Network_NETWORK_HOST
			}
			if tt.spec.GetTest() != measurev1.Test_TEST_PING {
				req.Port, req.DataPort = testnet.FreePort(t), testnet.FreePort(t)
			}
			if tt.server != measurev1.Tool_TOOL_UNSPECIFIED {
				startServer(t, tt.server, req.Port, req.DataPort)
			}
			if tt.http {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					_, _ = w.Write([]byte("ok\n"))
				}))
				defer srv.Close()
				u, _ := url.Parse(srv.URL)
				port, _ := strconv.Atoi(u.Port())
				req.Port = uint32(port)
			}
			got := r.Run(ctx, req)
			checkResults(t, tt.spec, got)
			sizes := tt.spec.GetQperf().GetMsgSizeBytes()
			if want := max(1, len(sizes)); len(got) != want {
				t.Fatalf("%d results, want %d", len(got), want)
			}
			for i, res := range got {
				if res.GetStatus() != tt.want {
					t.Errorf("result %d: status %v (%s), want %v", i, res.GetStatus(), res.GetMessage(), tt.want)
					continue
				}
				if res.GetToolVersion() == "" || res.GetTargetAddress() != "127.0.0.1" || res.GetStartTime() == nil {
					t.Errorf("result %d: tool_version %q, target_address %q, start_time %v", i, res.GetToolVersion(), res.GetTargetAddress(), res.GetStartTime())
				}
				if len(sizes) > 0 && (len(res.GetSpec().GetQperf().GetMsgSizeBytes()) != 1 || res.GetSpec().GetQperf().GetMsgSizeBytes()[0] != sizes[i]) {
					t.Errorf("result %d: spec %v, want msg_size %d", i, res.GetSpec(), sizes[i])
				}
				if res.GetStatus() == measurev1.Status_STATUS_OK {
					if res.GetElapsed().AsDuration() <= 0 {
						t.Errorf("result %d: elapsed %v", i, res.GetElapsed().AsDuration())
					}
					if tt.check != nil {
						tt.check(t, res)
					}
				}
			}
		})
	}
}

func TestDetectTools(t *testing.T) {
	testnet.Need(t, "ping", "qperf", "iperf3", "curl", "ab")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infos := DetectTools(ctx)
	want := []struct {
		tool   measurev1.Tool
		prefix string
	}{
		{measurev1.Tool_TOOL_PING, "ping from iputils "},
		{measurev1.Tool_TOOL_QPERF, "qperf "},
		{measurev1.Tool_TOOL_IPERF3, "iperf 3."},
		{measurev1.Tool_TOOL_CURL, "curl "},
		{measurev1.Tool_TOOL_AB, "ApacheBench 2."},
	}
	if len(infos) != len(want) {
		t.Fatalf("DetectTools = %v", infos)
	}
	for i, w := range want {
		if infos[i].GetTool() != w.tool || !strings.HasPrefix(infos[i].GetVersion(), w.prefix) || infos[i].GetError() != "" {
			t.Errorf("DetectTools[%d] = %v, want %v %q...", i, infos[i], w.tool, w.prefix)
		}
	}
}

func TestDetectMissingTool(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a tool lookup; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info := detect(ctx, measurev1.Tool_TOOL_QPERF, proc.Command{Name: "meshperf-no-such-tool", Args: []string{"--version"}})
	if info.GetError() != "not found in PATH" || info.GetVersion() != "" {
		t.Errorf("detect = %v", info)
	}
}
