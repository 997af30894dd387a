package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// startCoordinator runs the real coordinator on a unix socket and a
// 127.0.0.1 port until the test ends; it returns the agents' TCP target
// and a MeshService client on the socket.
func startCoordinator(t *testing.T) (string, meshv1.MeshServiceClient, *grpc.ClientConn) {
	t.Helper()
	return startCoordinatorWith(t, func(*coordinator.Config) {})
}

// startCoordinatorWith is startCoordinator with the config edited by edit.
func startCoordinatorWith(t *testing.T, edit func(*coordinator.Config)) (string, meshv1.MeshServiceClient, *grpc.ClientConn) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "coordinator.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	ready := make(chan struct{})
	cfg := coordinator.Config{
		ListenAddress: addr, SocketPath: sock, DBPath: filepath.Join(dir, "meshperf.db"),
		Ready:          func() { close(ready) },
		AllowAddresses: []registry.AddressClass{registry.ClassLoopback}, // the agents register 127.0.0.x
	}
	edit(&cfg)
	testutil.Run(t, testnet.Ctx(t, 2*time.Minute), "coordinator.Run", ready, func(ctx context.Context) error { return coordinator.Run(ctx, cfg) })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return addr, meshv1.NewMeshServiceClient(conn), conn
}

// TestRefusedByCoordinator checks, by hand on the real coordinator, the
// codes that make an agent give up (what TestRunRefused's fake answers).
func TestRefusedByCoordinator(t *testing.T) {
	_, _, conn := startCoordinator(t)
	host := []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.0.1"}}
	tests := []struct {
		name     string
		reg      *agentv1.Register
		wantCode codes.Code
		wantIn   []string
	}{
		{"protocol mismatch", &agentv1.Register{NodeName: "node-1", ProtocolVersion: protocol.Version + 1, Addresses: host},
			codes.FailedPrecondition, []string{"protocol", fmt.Sprint(protocol.Version + 1)}},
		{"bad node name", &agentv1.Register{NodeName: "Node_1", ProtocolVersion: protocol.Version, Addresses: host},
			codes.InvalidArgument, []string{`"Node_1"`}},
		{"no host address", &agentv1.Register{NodeName: "node-1", ProtocolVersion: protocol.Version},
			codes.InvalidArgument, []string{"host address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(testnet.Ctx(t, 2*time.Minute), 30*time.Second)
			defer cancel()
			s, err := agentv1.NewAgentServiceClient(conn).Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: tt.reg}}); err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			if status.Code(err) != tt.wantCode {
				t.Fatalf("Recv = %v, want code %v", err, tt.wantCode)
			}
			for _, want := range tt.wantIn {
				if !strings.Contains(status.Convert(err).Message(), want) {
					t.Errorf("refusal %q does not contain %s", status.Convert(err).Message(), want)
				}
			}
		})
	}
}

// TestMesh runs a real coordinator and two real agents on 127.0.0.1 and
// 127.0.0.2 in this process, triggers a host-host run over the unix
// socket and checks every result.
func TestMesh(t *testing.T) {
	testnet.Need(t, "ping", "qperf", "iperf3", "curl")
	agentAddr, mesh, _ := startCoordinator(t)
	a := baseConfig(t, agentAddr, "node-1")
	b := baseConfig(t, agentAddr, "node-2")
	b.HostIP = netip.MustParseAddr("127.0.0.2")
	b.Ports = a.Ports // the Gate keeps heavy tests on two nodes apart
	errA, errB := startAgent(t, a), startAgent(t, b)
	defer noServersLeft(t, a.Ports.Iperf3, a.Ports.Qperf)

	ctx := testnet.Ctx(t, 2*time.Minute)
	connected := func() bool {
		resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
		if err != nil {
			return false
		}
		n := 0
		for _, ag := range resp.GetAgents() {
			if ag.GetConnected() {
				n++
			}
		}
		return n == 2
	}
	if !testutil.Within(30*time.Second, 20*time.Millisecond, connected) {
		select {
		case err := <-errA:
			t.Fatalf("agent node-1 returned: %v", err)
		case err := <-errB:
			t.Fatalf("agent node-2 returned: %v", err)
		default:
			t.Fatal("the agents did not connect within 30 s")
		}
	}

	sec := durationpb.New(time.Second)
	spec := &measurev1.RunSpec{
		Repeats: 1, // one sample of each, whatever the default repeats
		Paths:   []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Tests: []*measurev1.TestSpec{
			{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: 5, Interval: durationpb.New(200 * time.Millisecond)}}},
			{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: sec}}},
			{Test: measurev1.Test_TEST_IPERF3_TCP, Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: sec}}},
			{Test: measurev1.Test_TEST_HTTP, Params: &measurev1.TestSpec_Http{Http: &measurev1.HttpParams{Timeout: sec}}},
		},
	}
	trig, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: spec})
	if err != nil {
		t.Fatalf("TriggerRun: %v", err)
	}
	planned := len(trig.GetRun().GetPlanned())
	if want := 2 * 4; planned != want { // 2 ordered pairs x 4 tests
		t.Fatalf("%d planned tests, want %d", planned, want)
	}

	watch, err := mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: trig.GetRun().GetRunId()})
	if err != nil {
		t.Fatalf("WatchRun: %v", err)
	}
	var results []*measurev1.Result
	var last *measurev1.Run
	for {
		u, err := watch.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WatchRun: %v", err)
		}
		last = u.GetRun()
		results = append(results, u.GetResults()...)
	}
	if last.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED || int(last.GetTestsDone()) != planned {
		t.Errorf("run ended %v with %d/%d tests done, %d failed: %s", last.GetState(), last.GetTestsDone(), planned, last.GetTestsFailed(), last.GetMessage())
	}
	if len(results) != planned {
		t.Errorf("%d results, want %d", len(results), planned)
	}
	hostIP := map[string]string{"node-1": "127.0.0.1", "node-2": "127.0.0.2"}
	seen := map[string]bool{}
	for _, r := range results {
		name := fmt.Sprintf("%s %s->%s", r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode())
		seen[name] = true
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			t.Errorf("%s: %v: %s", name, r.GetStatus(), r.GetMessage())
			continue
		}
		if r.GetTargetAddress() != hostIP[r.GetDstNode()] || r.GetSrcNode() == r.GetDstNode() {
			t.Errorf("%s: target %s, want %s", name, r.GetTargetAddress(), hostIP[r.GetDstNode()])
		}
		checkFigures(t, name, r)
	}
	if len(seen) != planned {
		t.Errorf("results cover %d distinct tests, want %d: %v", len(seen), planned, seen)
	}
}

// checkFigures checks that a result's figures are plausible on loopback.
func checkFigures(t *testing.T, name string, r *measurev1.Result) {
	t.Helper()
	in := func(what string, x, lo, hi float64) {
		if !(x > lo && x < hi) {
			t.Errorf("%s: %s = %v, want in (%v, %v)", name, what, x, lo, hi)
		}
	}
	switch m := r.GetMetrics().(type) {
	case *measurev1.Result_Ping:
		p := m.Ping
		if p.GetPacketsTransmitted() != 5 || p.GetPacketsReceived() != 5 || p.GetLossRatio() != 0 {
			t.Errorf("%s: %d/%d packets, loss %v; want 5/5, 0", name, p.GetPacketsReceived(), p.GetPacketsTransmitted(), p.GetLossRatio())
		}
		in("rtt_avg_seconds", p.GetRttAvgSeconds(), 0, 0.1)
		if p.RttMedianSeconds == nil {
			t.Errorf("%s: no rtt_median_seconds", name)
		}
		in("rtt_median_seconds", p.GetRttMedianSeconds(), 0, 0.1)
		if p.GetRttMinSeconds() > p.GetRttAvgSeconds() || p.GetRttAvgSeconds() > p.GetRttMaxSeconds() {
			t.Errorf("%s: rtt min %v avg %v max %v out of order", name, p.GetRttMinSeconds(), p.GetRttAvgSeconds(), p.GetRttMaxSeconds())
		}
	case *measurev1.Result_Qperf:
		in("latency_seconds", m.Qperf.GetLatencySeconds(), 0, 0.1)
		if m.Qperf.GetMsgSizeBytes() != 1 {
			t.Errorf("%s: msg size %d, want qperf's default 1", name, m.Qperf.GetMsgSizeBytes())
		}
	case *measurev1.Result_Iperf3:
		in("throughput_bps", m.Iperf3.GetThroughputBps(), 1e7, 1e13)
		if m.Iperf3.GetBytesReceived() == 0 {
			t.Errorf("%s: no bytes received", name)
		}
	case *measurev1.Result_Http:
		if m.Http.GetHttpCode() != 200 || m.Http.GetSizeDownloadBytes() == 0 {
			t.Errorf("%s: HTTP %d, %d bytes; want 200 and a body", name, m.Http.GetHttpCode(), m.Http.GetSizeDownloadBytes())
		}
		in("total_seconds", m.Http.GetTotalSeconds(), 0, 1)
	default:
		t.Errorf("%s: no metrics in an OK result", name)
	}
}
