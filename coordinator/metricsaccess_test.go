package coordinator_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// TestMetricsSecurityConfig: the metrics TLS and token flags are checked
// before anything starts, with errors that name them.
func TestMetricsSecurityConfig(t *testing.T) {
	pki := mtlstest.New(t)
	tok := testutil.TokenFile(t, "t")
	for _, tt := range []struct {
		name   string
		cfg    coordinator.Config
		wantIn string
	}{
		{"key missing", coordinator.Config{MetricsAddress: "127.0.0.1:0", MetricsTLSCertFile: pki.Server.Cert}, "--metrics-tls-cert given without --metrics-tls-key"},
		{"token without TLS", coordinator.Config{MetricsAddress: "127.0.0.1:0", MetricsTokenFile: tok}, "--metrics-token-file needs --metrics-tls-cert"},
		{"client CA without TLS", coordinator.Config{MetricsAddress: "127.0.0.1:0", MetricsTLSClientCAFile: pki.CA.File}, "--metrics-tls-client-ca needs"},
		{"no metrics listener", coordinator.Config{MetricsTLSCertFile: pki.Server.Cert, MetricsTLSKeyFile: pki.Server.Key}, "--metrics-listen is empty"},
		{"unreadable certificate", coordinator.Config{MetricsAddress: "127.0.0.1:0", MetricsTLSCertFile: "/nonexistent.crt", MetricsTLSKeyFile: pki.Server.Key}, "/nonexistent.crt"},
		{"empty token", coordinator.Config{MetricsAddress: "127.0.0.1:0", MetricsTLSCertFile: pki.Server.Cert, MetricsTLSKeyFile: pki.Server.Key,
			MetricsTokenFile: testutil.TokenFile(t, "")}, "is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.cfg.ListenAddress = "127.0.0.1:0"
			tt.cfg.DBPath = filepath.Join(dir, "db")
			err := coordinator.Run(testnet.Ctx(t, 10*time.Second), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Run: %v, want an error with %q", err, tt.wantIn)
			}
		})
	}
}

// TestMetricsOverTLS: `serve` with the metrics TLS files and a token
// serves /metrics over HTTPS to a scraper with the token only, and
// /healthz to anyone.
func TestMetricsOverTLS(t *testing.T) {
	pki := mtlstest.New(t)
	const token = "metrics-token"
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	_, _, logs := start(t, coordinator.Config{MetricsAddress: metricsAddr,
		MetricsTLSCertFile: pki.Server.Cert, MetricsTLSKeyFile: pki.Server.Key, MetricsTokenFile: testutil.TokenFile(t, token)})
	pem, err := os.ReadFile(pki.CA.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}, DisableKeepAlives: true}}
	ctx := testnet.Ctx(t, 10*time.Second)
	for _, tt := range []struct {
		path, auth string
		want       int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "Bearer wrong", http.StatusUnauthorized},
		{"/metrics", "Bearer " + token, http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metricsAddr+tt.path, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s with %q: %d, want %d", tt.path, tt.auth, resp.StatusCode, tt.want)
		}
	}
	if !strings.Contains(logs.String(), `msg="metrics listening"`) || !strings.Contains(logs.String(), "tls=true") || !strings.Contains(logs.String(), `reason="wrong bearer token"`) {
		t.Errorf("log lacks the metrics listener's security or the refusal:\n%s", logs.String())
	}
}
