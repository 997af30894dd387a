package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestCoordinatorServesMetrics runs the whole daemon with a metrics
// address: /metrics and /healthz answer, the agent gauges follow real agent
// sessions, a run's results reach the metrics through the run manager, and
// everything stops cleanly when the context ends.
func TestCoordinatorServesMetrics(t *testing.T) {
	ctx := testnet.Ctx(t, 60*time.Second)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- coordinator.Run(runCtx, coordinator.Config{
			ListenAddress: grpcAddr, DBPath: filepath.Join(t.TempDir(), "meshperf.db"),
			HeartbeatInterval: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
			MetricsAddress: metricsAddr, Ready: func() { close(ready) },
			AllowAddresses: []registry.AddressClass{registry.ClassLoopback}, // the test's agents register 127.0.0.x
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	base := "http://" + metricsAddr

	if resp := get(t, ctx, base+"/healthz"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %s, want 200", resp.Status)
	}
	fams := scrape(t, ctx, base)
	for _, tt := range []struct {
		metric string
		want   float64
	}{
		{"meshperf_agents_connected", 0},
		{"meshperf_agents_known", 0},
		{"meshperf_runs_active", 0},
		{"meshperf_results_ingested_total", 0},
	} {
		if got, there := value(fams, tt.metric, nil); !there || got != tt.want {
			t.Errorf("%s = %v (present %v), want %v", tt.metric, got, there, tt.want)
		}
	}
	if got, there := value(fams, "meshperf_store_size_bytes", nil); !there || got <= 0 {
		t.Errorf("meshperf_store_size_bytes = %v (present %v), want the file's size", got, there)
	}

	// Two agents register: the registry knows them and they are connected.
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	agentCtx, agentsGone := context.WithCancel(ctx)
	defer agentsGone()
	var streams []agentv1.AgentService_ConnectClient
	for i, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		stream, err := agentv1.NewAgentServiceClient(conn).Connect(agentCtx)
		if err != nil {
			t.Fatal(err)
		}
		reg := &agentv1.Register{
			NodeName: fmt.Sprintf("node-%d", i+1), ProtocolVersion: protocol.Version, AgentVersion: "test",
			Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip}},
		}
		if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}}); err != nil {
			t.Fatal(err)
		}
		if m, err := stream.Recv(); err != nil || m.GetRegistered() == nil {
			t.Fatalf("registration of %s: %v, %v", reg.GetNodeName(), m, err)
		}
		streams = append(streams, stream)
	}
	// The agents heartbeat for longer than their heartbeat timeout (10
	// intervals): that proves their nodes, which stay in meshes once
	// their agents are gone (a node whose agent left before that would
	// not: registry, unproven.go).
	for range 16 {
		for _, s := range streams {
			if err := s.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fams = scrape(t, ctx, base)
	for _, tt := range []struct {
		metric string
		want   float64
	}{
		{"meshperf_agents_connected", 2},
		{"meshperf_agents_known", 2},
	} {
		if got, _ := value(fams, tt.metric, nil); got != tt.want {
			t.Errorf("with two agents registered: %s = %v, want %v", tt.metric, got, tt.want)
		}
	}

	// The agents go; their nodes stay known, so a run covers them and its
	// tests fail as agent_unavailable, which the run manager reports.
	agentsGone()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if got, _ := value(scrape(t, ctx, base), "meshperf_agents_connected", nil); got == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the agents never disconnected")
		}
	}
	mesh := meshv1.NewMeshServiceClient(conn)
	tr, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Repeats: 1, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
	}})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: tr.GetRun().GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := watch.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	fams = scrape(t, ctx, base)
	for _, tt := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"meshperf_results_ingested_total", nil, 2},
		{"meshperf_runs_total", map[string]string{"state": "failed"}, 1},
		{"meshperf_runs_active", nil, 0},
		{"meshperf_node_results_total", nodeStatus("node-1", "src", "ping", "host-host", "agent_unavailable"), 1},
		{"meshperf_agents_known", nil, 2},
	} {
		if got, there := value(fams, tt.metric, tt.labels); !there || got != tt.want {
			t.Errorf("after a run: %s%v = %v (present %v), want %v", tt.metric, tt.labels, got, there, tt.want)
		}
	}
	if fams["meshperf_pair_latency_seconds"] != nil {
		t.Error("per-pair series without MetricsPerPair")
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after its context ended", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after its context ended")
	}
	if c, err := net.Dial("tcp", metricsAddr); err == nil {
		_ = c.Close()
		t.Error("the metrics address still accepts connections after Run returned")
	}
}
