package agent_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// TestMain fails the package if a goroutine (a session, a server reaper,
// a gRPC stream) outlives the tests.
func TestMain(m *testing.M) {
	if sock := os.Getenv(endpointHelperEnv); sock != "" {
		runEndpointHelper(sock)
		return
	}
	goleak.VerifyTestMain(m)
}

// The tests send traffic only to 127.0.0.0/8 in the root namespace.

// startAgent runs agent.Run until the test ends; the returned channel
// gets Run's error.
func startAgent(t *testing.T, cfg agent.Config) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(testnet.Ctx(t, 2*time.Minute))
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- agent.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			t.Errorf("agent %s did not return within 30 s of its context's end", cfg.NodeName)
		}
	})
	return errc
}

// fakeCoordinator serves AgentService on a unix socket; connect runs each
// agent session.
type fakeCoordinator struct {
	agentv1.UnimplementedAgentServiceServer
	connect func(grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error
}

func (f *fakeCoordinator) Connect(s grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error {
	return f.connect(s)
}

// startFake starts a fake coordinator (a gRPC server with opts) and
// returns the agents' target.
func startFake(t *testing.T, connect func(grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error, opts ...grpc.ServerOption) string {
	t.Helper()
	target, _ := testutil.ServeGRPC(t, "unix", func(g *grpc.Server) {
		agentv1.RegisterAgentServiceServer(g, &fakeCoordinator{connect: connect})
	}, opts...)
	return target
}

// baseConfig is an agent on 127.0.0.1 with fresh ports and a fast
// reconnect.
func baseConfig(t *testing.T, coordinator, node string) agent.Config {
	t.Helper()
	return agent.Config{
		Coordinator:  coordinator,
		NodeName:     node,
		HostIP:       netip.MustParseAddr("127.0.0.1"),
		HTTPPort:     testnet.FreePort(t),
		Ports:        servers.Ports{Iperf3: testnet.FreePort(t), Qperf: testnet.FreePort(t), QperfData: testnet.FreePort(t)},
		ReconnectMin: 20 * time.Millisecond,
		ReconnectMax: 200 * time.Millisecond,
	}
}

// noServersLeft fails the test if a server on ports outlives it (after a
// moment for SIGKILL to land), and kills it.
func noServersLeft(t *testing.T, ports ...uint32) {
	t.Helper()
	var left []int
	ok := testutil.Within(15*time.Second, 20*time.Millisecond, func() bool {
		left = testutil.ToolServers(ports...)
		return len(left) == 0
	})
	if !ok {
		t.Errorf("servers %v still run on ports %v", left, ports)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// captureLogs sends cfg's log, at every level, to the returned buffer.
func captureLogs(cfg *agent.Config) *testutil.SyncBuffer {
	b := &testutil.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return b
}
