package coordinator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/cli"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// running is a coordinator started by runAt.
type running struct {
	addr, sock string
	logs       *testutil.SyncBuffer
	stop       func() // stops it and waits; safe to call twice
}

// runAt runs the coordinator with cfg on 127.0.0.1, a socket and the
// store dir/meshperf.db (which outlives it: a second runAt on dir is a
// restart) until stop or the test's end; its log goes to logs (a fresh
// buffer if nil).
func runAt(t *testing.T, dir string, cfg coordinator.Config, logs *testutil.SyncBuffer) *running {
	t.Helper()
	if logs == nil {
		logs = &testutil.SyncBuffer{}
	}
	if cfg.AllowAddresses == nil { // the fakes register loopback addresses
		cfg.AllowAddresses = []registry.AddressClass{registry.ClassLoopback}
	}
	cfg.ListenAddress = fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	cfg.SocketPath = filepath.Join(t.TempDir(), "coordinator.sock")
	cfg.DBPath = filepath.Join(dir, "meshperf.db")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	stop := testutil.Run(t, testnet.Ctx(t, 2*time.Minute), "coordinator.Run", ready, func(ctx context.Context) error { return coordinator.Run(ctx, cfg) })
	return &running{addr: cfg.ListenAddress, sock: cfg.SocketPath, logs: logs, stop: stop}
}

// socketConn dials the coordinator's unix socket (the CLI's way in).
func (c *running) socketConn(t *testing.T) *grpc.ClientConn {
	return dial(t, "unix://"+c.sock, insecure.NewCredentials())
}

// cli runs `coordinator ARGS` against the socket and returns stdout.
func (c *running) cli(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := cli.NewCommand(&out, &errb)
	cmd.SetArgs(append([]string{"--coordinator", c.sock}, args...))
	if err := cmd.ExecuteContext(testnet.Ctx(t, 30*time.Second)); err != nil {
		t.Fatalf("coordinator %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// playAgent registers node over conn with a host address of ip and plays
// its session (fakeagent.Play, heartbeats every 200 ms) until ctx or the
// test ends, answering each Work with answer (nil: none).
func playAgent(t *testing.T, ctx context.Context, conn *grpc.ClientConn, node, ip string, answer func(*agentv1.Work) *agentv1.WorkResult) *fakeagent.Agent {
	t.Helper()
	return fakeagent.Play(t, ctx, agentv1.NewAgentServiceClient(conn), &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip}}}, fakeagent.Config{Answer: answer})
}

// scrapeText fetches url (a /metrics page) as text.
func scrapeText(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testnet.Ctx(t, 10*time.Second), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
