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

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// startTLSCoordinator runs the real coordinator with mTLS on host (a
// loopback address) until the test ends; it returns the agents' target,
// a MeshService client on its socket and its log.
func startTLSCoordinator(t *testing.T, host string, server mtlstest.Pair, clientCA string) (string, meshv1.MeshServiceClient, *testutil.SyncBuffer) {
	t.Helper()
	dir := t.TempDir()
	logs := &testutil.SyncBuffer{}
	cfg := coordinator.Config{
		ListenAddress: fmt.Sprintf("%s:%d", host, testnet.FreePort(t)), SocketPath: filepath.Join(dir, "c.sock"),
		DBPath: filepath.Join(dir, "meshperf.db"), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TLSCertFile: server.Cert, TLSKeyFile: server.Key, TLSClientCAFile: clientCA,
		AllowAddresses: []registry.AddressClass{registry.ClassLoopback}, // the agent registers 127.0.0.1
	}
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	testutil.Run(t, testnet.Ctx(t, 2*time.Minute), "coordinator.Run", ready, func(ctx context.Context) error { return coordinator.Run(ctx, cfg) })
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return cfg.ListenAddress, meshv1.NewMeshServiceClient(conn), logs
}

// connected reports whether node has a session with the coordinator.
func connected(t *testing.T, mesh meshv1.MeshServiceClient, node string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		t.Fatalf("ListAgents: %v", err)
	}
	for _, a := range resp.GetAgents() {
		if a.GetNodeName() == node && a.GetConnected() {
			return true
		}
	}
	return false
}

// TestMutualTLS: an agent with a valid certificate registers with a
// coordinator that requires mTLS; without one, with another CA's or an
// expired one, it is refused and the coordinator logs why; an agent
// refuses a coordinator whose certificate its CA did not sign or that is
// for another host, and logs the reason at error level while it retries.
func TestMutualTLS(t *testing.T) {
	pki := mtlstest.New(t)
	node1 := pki.CA.IssueNode(t, "node-1") // the agent's certificate names its node
	tests := []struct {
		name      string
		host      string         // the coordinator listens here
		server    mtlstest.Pair  // the coordinator's certificate
		client    *mtlstest.Pair // the agent's; nil: plaintext
		wantCoord string         // in the coordinator's log; "" when the agent registers
		wantAgent string         // in the agent's error line
	}{
		{name: "valid certificate", host: "127.0.0.1", server: pki.Server, client: &node1},
		{name: "no certificate", host: "127.0.0.1", server: pki.Server, client: nil, wantCoord: "TLS handshake with a client failed"},
		{name: "certificate of another CA", host: "127.0.0.1", server: pki.Server, client: &pki.OtherClient,
			wantCoord: "unknown authority", wantAgent: "remote error: tls"},
		{name: "expired certificate", host: "127.0.0.1", server: pki.Server, client: &pki.Expired,
			wantCoord: "expired", wantAgent: "remote error: tls"},
		{name: "coordinator of another CA", host: "127.0.0.1", server: pki.OtherServer, client: &node1,
			wantCoord: "TLS handshake with a client failed", wantAgent: "unknown authority"},
		{name: "coordinator certificate for another host", host: "127.0.0.2", server: pki.Server, client: &node1,
			wantCoord: "TLS handshake with a client failed", wantAgent: "127.0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, mesh, coordLog := startTLSCoordinator(t, tt.host, tt.server, pki.CA.File)
			cfg := baseConfig(t, target, "node-1")
			if tt.client != nil {
				cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = tt.client.Cert, tt.client.Key, pki.CA.File
			}
			agentLog := captureLogs(&cfg)
			startAgent(t, cfg)
			if tt.wantCoord == "" {
				if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return connected(t, mesh, "node-1") }) {
					t.Fatalf("the agent never registered; agent log:\n%s\ncoordinator log:\n%s", agentLog, coordLog)
				}
				return
			}
			if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(coordLog.String(), tt.wantCoord) }) {
				t.Errorf("coordinator log lacks %q:\n%s", tt.wantCoord, coordLog)
			}
			if tt.wantAgent != "" {
				found := testutil.Within(30*time.Second, 20*time.Millisecond, func() bool {
					for _, l := range strings.Split(agentLog.String(), "\n") {
						if strings.Contains(l, "level=ERROR") && strings.Contains(l, "TLS handshake with the coordinator failed") && strings.Contains(l, tt.wantAgent) {
							return true
						}
					}
					return false
				})
				if !found {
					t.Errorf("agent log lacks an error line on the TLS handshake with %q:\n%s", tt.wantAgent, agentLog)
				}
			}
			if connected(t, mesh, "node-1") {
				t.Error("the agent registered")
			}
			if testing.Verbose() {
				t.Logf("agent log:\n%s\ncoordinator log:\n%s", agentLog, coordLog)
			}
		})
	}
}

// TestTLSConfigRefused: TLS files go all together.
func TestTLSConfigRefused(t *testing.T) {
	pki := mtlstest.New(t)
	cfg := baseConfig(t, "127.0.0.1:1", "node-1")
	cfg.TLSCertFile, cfg.TLSKeyFile = pki.Client.Cert, pki.Client.Key
	err := agent.Run(testnet.Ctx(t, 10*time.Second), cfg)
	if err == nil || !strings.Contains(err.Error(), "without --tls-ca") {
		t.Errorf("Run = %v, want an error naming --tls-ca", err)
	}
}
