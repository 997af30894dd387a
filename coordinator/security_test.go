package coordinator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// start runs the coordinator with cfg's security fields on 127.0.0.1 and a
// socket until the test ends; it returns the TCP address, the socket and
// the log. A nil cfg.AllowAddresses allows loopback, which the tests'
// agents register; an empty one allows nothing.
func start(t *testing.T, cfg coordinator.Config) (string, string, *testutil.SyncBuffer) {
	t.Helper()
	if cfg.AllowAddresses == nil {
		cfg.AllowAddresses = []registry.AddressClass{registry.ClassLoopback}
	}
	dir := t.TempDir()
	logs := &testutil.SyncBuffer{}
	cfg.ListenAddress = fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	cfg.SocketPath = filepath.Join(dir, "coordinator.sock")
	cfg.DBPath = filepath.Join(dir, "meshperf.db")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	testutil.Run(t, testnet.Ctx(t, time.Minute), "coordinator.Run", ready, func(ctx context.Context) error { return coordinator.Run(ctx, cfg) })
	return cfg.ListenAddress, cfg.SocketPath, logs
}

func dial(t *testing.T, target string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func clientCreds(t *testing.T, ca string, pair mtlstest.Pair) credentials.TransportCredentials {
	t.Helper()
	f, err := mtls.Load(mtls.Config{CAFile: ca, CertFile: pair.Cert, KeyFile: pair.Key})
	if err != nil {
		t.Fatal(err)
	}
	return f.ClientCredentials()
}

// TestAPIToken: with TLS and an API token, MeshService on the TCP listener
// needs the token, the unix socket does not, and the health service stays
// open.
func TestAPIToken(t *testing.T) {
	pki := mtlstest.New(t)
	const token = "s3cret-token"
	addr, sock, logs := start(t, coordinator.Config{
		TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File,
		APITokenFile: testutil.TokenFile(t, token),
	})
	tcp := dial(t, addr, clientCreds(t, pki.CA.File, pki.Client))
	unix := dial(t, "unix://"+sock, insecure.NewCredentials())
	// Two agents, over TCP with their certificates (each naming its node)
	// and without the token, so that a run has a pair to measure.
	for i, node := range []string{"node-1", "node-2"} {
		register(t, dial(t, addr, clientCreds(t, pki.CA.File, pki.CA.IssueNode(t, node))), node, fmt.Sprintf("127.0.0.%d", i+1))
	}
	tests := []struct {
		name     string
		conn     *grpc.ClientConn
		auth     string // the authorization metadata; "" for none
		wantCode codes.Code
		wantIn   string
	}{
		{"tcp without token", tcp, "", codes.Unauthenticated, "no API token"},
		{"tcp wrong token", tcp, "Bearer nope", codes.Unauthenticated, "wrong API token"},
		{"tcp token of another length", tcp, "Bearer " + token + "x", codes.Unauthenticated, "wrong API token"},
		{"tcp not a bearer", tcp, "Basic " + token, codes.Unauthenticated, "not a bearer token"},
		{"tcp right token", tcp, "Bearer " + token, codes.OK, ""},
		{"unix without token", unix, "", codes.OK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if tt.auth != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tt.auth)
			}
			mesh := meshv1.NewMeshServiceClient(tt.conn)
			_, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
				Label: "auth-test", Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
				Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
			}})
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("TriggerRun: %v, want code %v", err, tt.wantCode)
			}
			if !strings.Contains(status.Convert(err).Message(), tt.wantIn) {
				t.Errorf("TriggerRun: %q, want %q in the message", status.Convert(err).Message(), tt.wantIn)
			}
			if tt.wantCode == codes.Unauthenticated && !strings.Contains(status.Convert(err).Message(), "authorization: Bearer") {
				t.Errorf("refusal %q does not say what is needed", status.Convert(err).Message())
			}
			// CancelRun, a mutating call too, is guarded alike.
			wantCancel := tt.wantCode
			if wantCancel == codes.OK {
				wantCancel = codes.NotFound
			}
			if _, err := mesh.CancelRun(ctx, &meshv1.CancelRunRequest{RunId: "01NOSUCHRUN"}); status.Code(err) != wantCancel {
				t.Errorf("CancelRun: %v, want code %v", err, wantCancel)
			}
			if _, err := healthpb.NewHealthClient(tt.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Errorf("health check: %v, want it open", err)
			}
		})
	}
	if !strings.Contains(logs.String(), "wrong API token") {
		t.Errorf("the coordinator did not log the refused token; log:\n%s", logs)
	}
}

// TestTLSListener: the TCP listener refuses clients without a valid
// certificate and says why in its log.
func TestTLSListener(t *testing.T) {
	pki := mtlstest.New(t)
	addr, _, logs := start(t, coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File})
	tests := []struct {
		name    string
		creds   credentials.TransportCredentials
		wantLog string // in the coordinator's log; "" when accepted
	}{
		{"valid client", clientCreds(t, pki.CA.File, pki.Client), ""},
		{"plaintext", insecure.NewCredentials(), "TLS handshake with a client failed"},
		{"no client certificate", noClientCert(t, pki.CA.File), "didn't provide a certificate"},
		{"client of another CA", clientCreds(t, pki.CA.File, pki.OtherClient), "unknown authority"},
		{"expired client", clientCreds(t, pki.CA.File, pki.Expired), "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := meshv1.NewMeshServiceClient(dial(t, addr, tt.creds)).ListAgents(ctx, &meshv1.ListAgentsRequest{})
			if tt.wantLog == "" {
				if err != nil {
					t.Fatalf("ListAgents: %v", err)
				}
				return
			}
			if status.Code(err) != codes.Unavailable {
				t.Errorf("ListAgents: %v, want Unavailable", err)
			}
			if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(logs.String(), tt.wantLog) }) {
				t.Errorf("coordinator log lacks %q:\n%s", tt.wantLog, logs)
			}
		})
	}
}

func noClientCert(t *testing.T, ca string) credentials.TransportCredentials {
	t.Helper()
	pki := mtlstest.New(t)
	f, err := mtls.Load(mtls.Config{CAFile: ca, CertFile: pki.Client.Cert, KeyFile: pki.Client.Key})
	if err != nil {
		t.Fatal(err)
	}
	c := f.ClientConfig()
	c.GetClientCertificate = nil
	return credentials.NewTLS(c)
}

// register opens an agent session for node over conn, without a token,
// and keeps it until the test ends.
func register(t *testing.T, conn *grpc.ClientConn, node, ip string) {
	t.Helper()
	connect(t, t.Context(), conn, &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip}}})
}

// connect opens an agent session over conn with reg, without a token, and
// returns its stream once registered (fakeagent.Connect); the session
// ends with ctx or the test.
func connect(t *testing.T, ctx context.Context, conn *grpc.ClientConn, reg *agentv1.Register) agentv1.AgentService_ConnectClient {
	t.Helper()
	return fakeagent.Connect(t, ctx, agentv1.NewAgentServiceClient(conn), reg)
}

// TestSecurityConfig: TLS files go all together, the token needs TLS, and
// each error names what is missing.
func TestSecurityConfig(t *testing.T) {
	pki := mtlstest.New(t)
	tok := testutil.TokenFile(t, "t")
	empty := testutil.TokenFile(t, "")
	tests := []struct {
		name   string
		cfg    coordinator.Config
		wantIn []string
	}{
		{"key missing", coordinator.Config{TLSCertFile: pki.Server.Cert, TLSClientCAFile: pki.CA.File}, []string{"without --tls-key"}},
		{"client CA missing", coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key}, []string{"without --tls-client-ca"}},
		{"token without TLS", coordinator.Config{APITokenFile: tok}, []string{"--api-token-file needs --tls-cert"}},
		{"empty token", coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File, APITokenFile: empty},
			[]string{"empty"}},
		{"unreadable CA", coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: "/nonexistent"},
			[]string{"/nonexistent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.cfg.ListenAddress = "127.0.0.1:0"
			tt.cfg.DBPath = filepath.Join(dir, "db")
			err := coordinator.Run(testnet.Ctx(t, 10*time.Second), tt.cfg)
			for _, want := range tt.wantIn {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Run: %v, want an error with %q", err, want)
				}
			}
			if _, err := os.Stat(tt.cfg.DBPath); err == nil {
				t.Errorf("Run created the store before refusing its configuration")
			}
		})
	}
}

// TestTLSReload: `serve` picks up a renewed server certificate and a
// rotated client CA from its files without a restart; the open connection
// goes on.
func TestTLSReload(t *testing.T) {
	pki := mtlstest.New(t)
	dir := t.TempDir()
	live := pki.Server.Copy(t, dir, "tls")
	liveCA := filepath.Join(dir, "ca.crt")
	mtlstest.Replace(t, liveCA, pki.CA.File)
	addr, _, logs := start(t, coordinator.Config{TLSCertFile: live.Cert, TLSKeyFile: live.Key, TLSClientCAFile: liveCA})
	open := dial(t, addr, clientCreds(t, pki.CA.File, pki.Client))
	serverSerial := func(conn *grpc.ClientConn) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var p peer.Peer
		if _, err := meshv1.NewMeshServiceClient(conn).ListAgents(ctx, &meshv1.ListAgentsRequest{}, grpc.Peer(&p)); err != nil {
			return "", err
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.String(), nil
	}
	if s, err := serverSerial(open); err != nil || s != mtlstest.Serial(t, pki.Server.Cert).String() {
		t.Fatalf("first connection: serial %s, %v", s, err)
	}

	// A new CA signs the new server and client certificates; the file of
	// the client CA holds both CAs, as during a rollout.
	now := time.Now()
	ca2 := mtlstest.NewCA(t, t.TempDir(), "ca-2")
	srv2 := ca2.Issue(t, "server-2", true, now.Add(-time.Hour), now.Add(time.Hour))
	cli2 := ca2.Issue(t, "client-2", false, now.Add(-time.Hour), now.Add(time.Hour))
	both := filepath.Join(t.TempDir(), "both.crt")
	if err := os.WriteFile(both, append(readFile(t, pki.CA.File), readFile(t, ca2.File)...), 0o600); err != nil {
		t.Fatal(err)
	}
	mtlstest.ReplacePair(t, live, srv2)
	mtlstest.Replace(t, liveCA, both)
	want := mtlstest.Serial(t, srv2.Cert).String()
	var got string
	var err error
	if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool {
		got, err = serverSerial(dial(t, addr, clientCreds(t, ca2.File, cli2)))
		return got == want
	}) {
		t.Fatalf("new connections: serial %s, %v; want the new certificate's %s\n%s", got, err, want, logs)
	}
	if _, err := serverSerial(dial(t, addr, clientCreds(t, both, pki.Client))); err != nil {
		t.Errorf("client of the old CA, still in the client CA file: %v", err)
	}
	if s, err := serverSerial(open); err != nil || s != mtlstest.Serial(t, pki.Server.Cert).String() {
		t.Errorf("the connection open before the rotation: serial %s, %v; want it alive with the old certificate", s, err)
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") || !strings.Contains(logs.String(), "TLS CA reloaded") {
		t.Errorf("no info line on the reloads:\n%s", logs)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
