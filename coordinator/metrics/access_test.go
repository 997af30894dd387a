package metrics_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/lograte"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// serveAccess serves a new Metrics with access on loopback and returns its
// address and log.
func serveAccess(t *testing.T, access func(*mtlstest.PKI) metrics.Access, pki *mtlstest.PKI) (string, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	m, err := metrics.New(metrics.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetAccess(access(pki)); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, l, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String(), logs
}

// httpsClient trusts pki's CA and presents pair, if set.
func httpsClient(t *testing.T, pki *mtlstest.PKI, pair *mtlstest.Pair) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(pki.CA.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if pair != nil {
		cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		// Always present it, even to a server that names another CA.
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
}

// TestMetricsAccess: /metrics over TLS behind a bearer token or a client
// certificate, on a real HTTP server on loopback; /healthz stays open.
func TestMetricsAccess(t *testing.T) {
	const token = "s3cret-metrics-token"
	pki := mtlstest.New(t)
	serverFiles := func(p *mtlstest.PKI, ca string) *tls.Config {
		f, err := mtls.LoadServer(mtls.Config{CertFile: p.Server.Cert, KeyFile: p.Server.Key, CAFile: ca})
		if err != nil {
			t.Fatal(err)
		}
		return f.HTTPServerConfig()
	}
	tokenOnly := func(p *mtlstest.PKI) metrics.Access {
		return metrics.Access{TLS: serverFiles(p, ""), TokenFile: testutil.TokenFile(t, token)}
	}
	clientCA := func(p *mtlstest.PKI) metrics.Access {
		return metrics.Access{TLS: serverFiles(p, p.CA.File), RequireClientCert: true}
	}
	open := func(*mtlstest.PKI) metrics.Access { return metrics.Access{} }
	type request struct {
		name       string
		scheme     string // "https" or "http"
		path       string
		auth       string // the Authorization header; "" for none
		client     *mtlstest.Pair
		wantStatus int // 0: the request itself fails (handshake)
		wantAuth   string
		wantLog    string
	}
	for _, tt := range []struct {
		name     string
		access   func(*mtlstest.PKI) metrics.Access
		requests []request
	}{
		{"open", open, []request{
			{name: "metrics", scheme: "http", path: "/metrics", wantStatus: 200},
			{name: "healthz", scheme: "http", path: "/healthz", wantStatus: 200},
		}},
		{"TLS and token", tokenOnly, []request{
			{name: "no token", scheme: "https", path: "/metrics", wantStatus: 401, wantAuth: `Bearer realm="meshperf metrics"`,
				wantLog: `msg="metrics scrape refused"`},
			{name: "wrong token", scheme: "https", path: "/metrics", auth: "Bearer nope", wantStatus: 401,
				wantAuth: `Bearer realm="meshperf metrics", error="invalid_token"`, wantLog: `reason="wrong bearer token"`},
			{name: "token of another length", scheme: "https", path: "/metrics", auth: "Bearer " + token + "x", wantStatus: 401, wantAuth: `error="invalid_token"`},
			{name: "basic auth", scheme: "https", path: "/metrics", auth: "Basic " + token, wantStatus: 401, wantAuth: `error="invalid_request"`},
			{name: "right token", scheme: "https", path: "/metrics", auth: "Bearer " + token, wantStatus: 200},
			{name: "healthz without token", scheme: "https", path: "/healthz", wantStatus: 200},
			{name: "plaintext to the TLS port", scheme: "http", path: "/metrics", auth: "Bearer " + token, wantStatus: 400},
		}},
		{"TLS and client CA", clientCA, []request{
			{name: "no client certificate", scheme: "https", path: "/metrics", wantStatus: 403, wantLog: `reason="no client certificate signed by the metrics client CA"`},
			{name: "client certificate", scheme: "https", path: "/metrics", client: &pki.Client, wantStatus: 200},
			{name: "another CA's client certificate", scheme: "https", path: "/metrics", client: &pki.OtherClient, wantStatus: 0},
			{name: "healthz without certificate", scheme: "https", path: "/healthz", wantStatus: 200},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testnet.Ctx(t, 30*time.Second)
			addr, logs := serveAccess(t, tt.access, pki)
			for _, r := range tt.requests {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.scheme+"://"+addr+r.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r.auth != "" {
					req.Header.Set("Authorization", r.auth)
				}
				resp, err := httpsClient(t, pki, r.client).Do(req)
				if r.wantStatus == 0 {
					if err == nil {
						_ = resp.Body.Close()
						t.Errorf("%s: status %d; want the handshake refused", r.name, resp.StatusCode)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", r.name, err)
					continue
				}
				_ = resp.Body.Close()
				if resp.StatusCode != r.wantStatus {
					t.Errorf("%s: status %d, want %d", r.name, resp.StatusCode, r.wantStatus)
				}
				if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, r.wantAuth) || r.wantAuth == "" && got != "" {
					t.Errorf("%s: WWW-Authenticate %q, want %q", r.name, got, r.wantAuth)
				}
				if r.wantLog != "" && !strings.Contains(logs.String(), r.wantLog) {
					t.Errorf("%s: log lacks %q:\n%s", r.name, r.wantLog, logs.String())
				}
			}
		})
	}
}

// TestMetricsTokenRotation: a new token in the file replaces the old one;
// a bad new file keeps the old one, with a warning.
func TestMetricsTokenRotation(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	pki := mtlstest.New(t)
	file := testutil.TokenFile(t, "old-token")
	addr, logs := serveAccess(t, func(p *mtlstest.PKI) metrics.Access {
		f, err := mtls.LoadServer(mtls.Config{CertFile: p.Server.Cert, KeyFile: p.Server.Key})
		if err != nil {
			t.Fatal(err)
		}
		return metrics.Access{TLS: f.HTTPServerConfig(), TokenFile: file, TokenCheckInterval: time.Nanosecond}
	}, pki)
	status := func(token string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpsClient(t, pki, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, step := range []struct {
		name    string
		content string
		want    map[string]int // token to status
		wantLog string
	}{
		{"first token", "old-token\n", map[string]int{"old-token": 200, "new-token": 401}, ""},
		{"rotated", "new-token\n", map[string]int{"old-token": 401, "new-token": 200}, `msg="metrics token reloaded"`},
		{"bad new file keeps the token", "two words\n", map[string]int{"new-token": 200, "two": 401}, "holds white space inside the token"},
	} {
		if err := os.WriteFile(file, []byte(step.content), 0o600); err != nil {
			t.Fatal(err)
		}
		for tok, want := range step.want {
			if got := status(tok); got != want {
				t.Errorf("%s: token %q: status %d, want %d", step.name, tok, got, want)
			}
		}
		if !strings.Contains(logs.String(), step.wantLog) {
			t.Errorf("%s: log lacks %q:\n%s", step.name, step.wantLog, logs.String())
		}
	}
}

func TestSetAccessRefuses(t *testing.T) {
	pki := mtlstest.New(t)
	f, err := mtls.LoadServer(mtls.Config{CertFile: pki.Server.Cert, KeyFile: pki.Server.Key})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		access  metrics.Access
		wantErr string
	}{
		{"token without TLS", metrics.Access{TokenFile: testutil.TokenFile(t, "x")}, "without TLS the token would cross the network in clear"},
		{"client certificate without TLS", metrics.Access{RequireClientCert: true}, "--metrics-tls-client-ca needs"},
		{"empty token", metrics.Access{TLS: f.HTTPServerConfig(), TokenFile: testutil.TokenFile(t, " ")}, "is empty"},
		{"missing token file", metrics.Access{TLS: f.HTTPServerConfig(), TokenFile: "/nonexistent/token"}, "--metrics-token-file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := metrics.New(metrics.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetAccess(tt.access); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("SetAccess = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestRefusedScrapesLogBounded: a flood of scrapes without the token is
// refused each time but logged only for the burst of lograte.Bucket, so
// that anyone who reaches the port cannot flood the coordinator's log.
func TestRefusedScrapesLogBounded(t *testing.T) {
	pki := mtlstest.New(t)
	addr, logs := serveAccess(t, func(p *mtlstest.PKI) metrics.Access {
		f, err := mtls.LoadServer(mtls.Config{CertFile: p.Server.Cert, KeyFile: p.Server.Key})
		if err != nil {
			t.Fatal(err)
		}
		return metrics.Access{TLS: f.HTTPServerConfig(), TokenFile: testutil.TokenFile(t, "s3cret")}
	}, pki)
	client := httpsClient(t, pki, nil)
	const n = 100
	start := time.Now()
	for range n {
		resp, err := client.Get("https://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	// The bucket refills one warning per lograte.Interval: a slow machine
	// (the race detector, a loaded CI) may see a few more than the burst,
	// never one per scrape.
	refills := int(time.Since(start)/lograte.Interval) + 1
	if got := strings.Count(logs.String(), `msg="metrics scrape refused"`); got < lograte.Burst || got > lograte.Burst+refills || got >= n {
		t.Errorf("%d refusals logged for %d scrapes, want the burst of %d (plus at most %d refills):\n%s", got, n, lograte.Burst, refills, logs)
	}
}
