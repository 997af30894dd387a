package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// runTLSCoordinator runs the real coordinator with mTLS on addr until stop
// is called or the test ends; it returns a MeshService client on its
// socket.
func runTLSCoordinator(t *testing.T, addr string, server mtlstest.Pair, clientCA string) (mesh meshv1.MeshServiceClient, stop func()) {
	t.Helper()
	dir := t.TempDir()
	cfg := coordinator.Config{
		ListenAddress: addr, SocketPath: filepath.Join(dir, "c.sock"), DBPath: filepath.Join(dir, "meshperf.db"),
		Logger: slog.New(slog.DiscardHandler), TLSCertFile: server.Cert, TLSKeyFile: server.Key, TLSClientCAFile: clientCA,
		AllowAddresses: []registry.AddressClass{registry.ClassLoopback}, // the agent registers 127.0.0.1
	}
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	stop = testutil.Run(t, testnet.Ctx(t, 2*time.Minute), "coordinator.Run", ready, func(ctx context.Context) error { return coordinator.Run(ctx, cfg) })
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return meshv1.NewMeshServiceClient(conn), stop
}

// TestTLSReload: the agent reads its certificate, key and CA anew when
// they change: after a rotation to a new CA on both sides, it registers
// again with a coordinator that has only the new CA, without a restart.
func TestTLSReload(t *testing.T) {
	pki := mtlstest.New(t)
	dir := t.TempDir()
	live := pki.CA.IssueNode(t, "node-1").Copy(t, dir, "tls") // names its node
	liveCA := filepath.Join(dir, "ca.crt")
	mtlstest.Replace(t, liveCA, pki.CA.File)
	addr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	mesh, stop := runTLSCoordinator(t, addr, pki.Server, pki.CA.File)
	cfg := baseConfig(t, addr, "node-1")
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = live.Cert, live.Key, liveCA
	agentLog := captureLogs(&cfg)
	startAgent(t, cfg)
	if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return connected(t, mesh, "node-1") }) {
		t.Fatalf("the agent never registered; agent log:\n%s", agentLog)
	}

	now := time.Now()
	ca2 := mtlstest.NewCA(t, t.TempDir(), "ca-2")
	srv2 := ca2.Issue(t, "server-2", true, now.Add(-time.Hour), now.Add(time.Hour))
	cli2 := ca2.IssueNode(t, "node-1")
	mtlstest.ReplacePair(t, live, cli2)
	mtlstest.Replace(t, liveCA, ca2.File)
	stop() // the agent loses its session and reconnects
	mesh, _ = runTLSCoordinator(t, addr, srv2, ca2.File)
	if !testutil.Within(60*time.Second, 20*time.Millisecond, func() bool { return connected(t, mesh, "node-1") }) {
		t.Fatalf("the agent never registered after the rotation; agent log:\n%s", agentLog)
	}
	if !strings.Contains(agentLog.String(), "TLS certificate reloaded") || !strings.Contains(agentLog.String(), "TLS CA reloaded") {
		t.Errorf("the agent did not log the reloads:\n%s", agentLog)
	}
}
