package mtls_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testutil"
)

// newClock returns a clock for Config.Now; tick moves it past the check
// interval.
func newClock() *testutil.Clock {
	return testutil.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
}

// tick moves clk past the check interval.
func tick(clk *testutil.Clock) { clk.Add(mtls.DefaultCheckInterval) }

// debugLogger logs to logs at debug level.
func debugLogger(logs *testutil.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func load(t *testing.T, pair mtlstest.Pair, ca string, clk *testutil.Clock, logs *testutil.SyncBuffer) *mtls.Files {
	t.Helper()
	cfg := mtls.Config{CertFile: pair.Cert, KeyFile: pair.Key, CAFile: ca}
	if clk != nil {
		cfg.Now = clk.Now
	}
	if logs != nil {
		cfg.Logger = debugLogger(logs)
	}
	f, err := mtls.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serve runs a gRPC health server with f's TLS on loopback until the test
// ends. Each answer carries the serial of the client's certificate in the
// header "client-serial".
func serve(t *testing.T, f *mtls.Files, logs *testutil.SyncBuffer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(mtls.ServerCredentials(f.ServerConfig(), debugLogger(logs))),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if p, ok := peer.FromContext(ctx); ok {
				if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
					_ = grpc.SetHeader(ctx, metadata.Pairs("client-serial", ti.State.PeerCertificates[0].SerialNumber.String()))
				}
			}
			return h(ctx, req)
		}))
	healthpb.RegisterHealthServer(g, health.NewServer())
	done := make(chan struct{})
	go func() { // owner: the test; ends with Stop
		defer close(done)
		_ = g.Serve(l)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return l.Addr().String()
}

// conn is a client connection to addr; every new one does a new handshake.
func conn(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// check makes a call on c and returns the serials of the server's and the
// client's certificates in its connection.
func check(t *testing.T, c *grpc.ClientConn) (server, client *big.Int, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	var md metadata.MD
	if _, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.Header(&md)); err != nil {
		return nil, nil, err
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return nil, nil, fmt.Errorf("no server certificate in the peer %v", p.AuthInfo)
	}
	client = new(big.Int)
	if v := md.Get("client-serial"); len(v) == 1 {
		client.SetString(v[0], 10)
	}
	return ti.State.PeerCertificates[0].SerialNumber, client, nil
}

// wantSerials checks a new connection: it works, with these certificates.
func wantSerials(t *testing.T, addr string, creds credentials.TransportCredentials, server, client string) {
	t.Helper()
	s, c, err := check(t, conn(t, addr, creds))
	if err != nil {
		t.Fatalf("new connection: %v", err)
	}
	if want := mtlstest.Serial(t, server); s.Cmp(want) != 0 {
		t.Errorf("server certificate serial %v, want %v (%s)", s, want, filepath.Base(server))
	}
	if want := mtlstest.Serial(t, client); c.Cmp(want) != 0 {
		t.Errorf("client certificate serial %v, want %v (%s)", c, want, filepath.Base(client))
	}
}

// TestReloadServerCertificate: a renewed server certificate, renamed over
// the old file, is presented to the next connection once the check
// interval has passed, not before; the open connection keeps working.
func TestReloadServerCertificate(t *testing.T) {
	pki := mtlstest.New(t)
	live := pki.Server.Copy(t, t.TempDir(), "tls")
	clk, logs := newClock(), &testutil.SyncBuffer{}
	addr := serve(t, load(t, live, pki.CA.File, clk, logs), logs)
	creds := load(t, pki.Client, pki.CA.File, nil, nil).ClientCredentials()

	open := conn(t, addr, creds)
	if s, _, err := check(t, open); err != nil || s.Cmp(mtlstest.Serial(t, pki.Server.Cert)) != 0 {
		t.Fatalf("first connection: serial %v, %v", s, err)
	}
	now := time.Now()
	renewed := pki.CA.Issue(t, "server-renewed", true, now.Add(-time.Hour), now.Add(2*time.Hour))
	mtlstest.ReplacePair(t, live, renewed)
	wantSerials(t, addr, creds, pki.Server.Cert, pki.Client.Cert) // within the interval: not looked at yet
	tick(clk)
	wantSerials(t, addr, creds, renewed.Cert, pki.Client.Cert)
	if s, _, err := check(t, open); err != nil || s.Cmp(mtlstest.Serial(t, pki.Server.Cert)) != 0 {
		t.Errorf("the connection open before the renewal: serial %v, %v; want it alive with the old certificate", s, err)
	}
	log := logs.String()
	if !strings.Contains(log, "TLS certificate reloaded") || !strings.Contains(log, "serial="+mtlstest.Serial(t, renewed.Cert).String()) ||
		!strings.Contains(log, "not_after=") {
		t.Errorf("no info line on the reload with the new serial and NotAfter:\n%s", log)
	}
}

// TestReloadCA: a new CA that signs new server and client certificates,
// swapped in on both sides, works for new connections, while the open one
// goes on; a client with the old material, or with an expired certificate
// of the new CA (given to it at start or by a rotation), is refused.
func TestReloadCA(t *testing.T) {
	pki := mtlstest.New(t)
	dir := t.TempDir()
	srv, srvCA := pki.Server.Copy(t, dir, "server"), filepath.Join(dir, "server-ca.crt")
	cli, cliCA := pki.Client.Copy(t, dir, "client"), filepath.Join(dir, "client-ca.crt")
	mtlstest.Replace(t, srvCA, pki.CA.File)
	mtlstest.Replace(t, cliCA, pki.CA.File)
	sclk, cclk, logs := newClock(), newClock(), &testutil.SyncBuffer{}
	addr := serve(t, load(t, srv, srvCA, sclk, logs), logs)
	creds := load(t, cli, cliCA, cclk, logs).ClientCredentials()
	open := conn(t, addr, creds)
	if _, _, err := check(t, open); err != nil {
		t.Fatalf("first connection: %v", err)
	}

	now := time.Now()
	ca2 := mtlstest.NewCA(t, t.TempDir(), "ca-2")
	srv2 := ca2.Issue(t, "server-2", true, now.Add(-time.Hour), now.Add(time.Hour))
	cli2 := ca2.Issue(t, "client-2", false, now.Add(-time.Hour), now.Add(time.Hour))
	expired2 := ca2.Issue(t, "expired-2", false, now.Add(-2*time.Hour), now.Add(-time.Hour))
	mtlstest.ReplacePair(t, srv, srv2)
	mtlstest.Replace(t, srvCA, ca2.File)
	mtlstest.ReplacePair(t, cli, cli2)
	mtlstest.Replace(t, cliCA, ca2.File)
	tick(sclk)
	tick(cclk)
	wantSerials(t, addr, creds, srv2.Cert, cli2.Cert)
	if _, _, err := check(t, open); err != nil {
		t.Errorf("the connection open before the rotation: %v", err)
	}
	if !strings.Contains(logs.String(), "TLS CA reloaded") {
		t.Errorf("no info line on the CA reload:\n%s", logs)
	}

	refused := []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{"old CA's client", load(t, pki.Client, pki.CA.File, nil, nil).ClientCredentials()},
		{"expired client of the new CA", load(t, expired2, ca2.File, nil, nil).ClientCredentials()},
	}
	for _, r := range refused {
		if _, _, err := check(t, conn(t, addr, r.creds)); err == nil {
			t.Errorf("%s: accepted", r.name)
		}
	}
	mtlstest.ReplacePair(t, cli, expired2)
	tick(cclk)
	if _, _, err := check(t, conn(t, addr, creds)); err == nil {
		t.Error("client rotated to an expired certificate: accepted")
	}
	if !strings.Contains(logs.String(), "expired") {
		t.Errorf("the server did not log the expired certificate:\n%s", logs)
	}
}

// TestReloadKeepsLastGood: a half-written or garbage file, or a new
// certificate whose key has not arrived yet, leaves the last good material
// in use, with one warning naming the file; once the files are whole, the
// new certificate is used.
func TestReloadKeepsLastGood(t *testing.T) {
	pki := mtlstest.New(t)
	dir := t.TempDir()
	srv, srvCA := pki.Server.Copy(t, dir, "server"), filepath.Join(dir, "server-ca.crt")
	cliCA := filepath.Join(dir, "client-ca.crt")
	mtlstest.Replace(t, srvCA, pki.CA.File)
	mtlstest.Replace(t, cliCA, pki.CA.File)
	sclk, cclk, logs := newClock(), newClock(), &testutil.SyncBuffer{}
	addr := serve(t, load(t, srv, srvCA, sclk, logs), logs)
	creds := load(t, pki.Client, cliCA, cclk, logs).ClientCredentials()
	now := time.Now()
	renewed := pki.CA.Issue(t, "server-renewed", true, now.Add(-time.Hour), now.Add(2*time.Hour))
	renewedPEM, err := os.ReadFile(renewed.Cert)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pki.CA.File)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func()
		file   string // named by the warning
		reason string // in the warning
	}{
		{"certificate written in place, half", func() { writeInPlace(t, srv.Cert, renewedPEM[:len(renewedPEM)/2]) }, srv.Cert, "cut short"},
		{"new certificate, old key", func() { mtlstest.Replace(t, srv.Cert, renewed.Cert) }, srv.Cert, "private key does not match"},
		{"client's CA garbage", func() { mtlstest.ReplaceWith(t, cliCA, []byte("garbage\n")) }, cliCA, "no PEM certificate"},
		{"server's CA written in place, half", func() { writeInPlace(t, srvCA, caPEM[:len(caPEM)/2]) }, srvCA, "cut short"},
		{"server's CA file removed", func() { _ = os.Remove(srvCA) }, srvCA, "no such file"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			seen := len(logs.String())
			st.change()
			tick(sclk)
			tick(cclk)
			wantSerials(t, addr, creds, pki.Server.Cert, pki.Client.Cert)
			warnings := warningsOn(logs.String()[seen:], st.file)
			if len(warnings) != 1 || !strings.Contains(warnings[0], st.reason) {
				t.Errorf("warnings naming %s: %q, want one with %q", st.file, warnings, st.reason)
			}
		})
	}
	before := strings.Count(logs.String(), "level=WARN")
	tick(sclk)
	tick(cclk)
	wantSerials(t, addr, creds, pki.Server.Cert, pki.Client.Cert)
	if after := strings.Count(logs.String(), "level=WARN"); after != before {
		t.Errorf("unchanged bad files warned again (%d warnings, then %d):\n%s", before, after, logs)
	}
	mtlstest.Replace(t, srv.Key, renewed.Key)
	mtlstest.Replace(t, srvCA, pki.CA.File)
	mtlstest.Replace(t, cliCA, pki.CA.File)
	tick(sclk)
	tick(cclk)
	wantSerials(t, addr, creds, renewed.Cert, pki.Client.Cert)
}

// writeInPlace rewrites file as a writer that is not done yet leaves it.
func writeInPlace(t *testing.T, file string, content []byte) {
	t.Helper()
	if err := os.WriteFile(file, content, 0o600); err != nil {
		t.Fatal(err)
	}
}

// warningsOn returns the warning lines of log that name file.
func warningsOn(log, file string) []string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, file) {
			lines = append(lines, l)
		}
	}
	return lines
}
