package mtls_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
)

func TestAllOrNone(t *testing.T) {
	tests := []struct {
		name    string
		files   []mtls.File
		want    bool
		wantErr string
	}{
		{"none", []mtls.File{{"tls-cert", ""}, {"tls-key", ""}}, false, ""},
		{"all", []mtls.File{{"tls-cert", "a"}, {"tls-key", "b"}}, true, ""},
		{"one missing", []mtls.File{{"tls-cert", "a"}, {"tls-key", ""}, {"tls-ca", "c"}}, false,
			"--tls-cert, --tls-ca given without --tls-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mtls.AllOrNone(tt.files...)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("AllOrNone = %v, %v; want %v, error with %q", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	pki := mtlstest.New(t)
	tests := []struct {
		name   string
		cfg    mtls.Config
		wantIn string
	}{
		{"missing CA", mtls.Config{CertFile: pki.Server.Cert, KeyFile: pki.Server.Key, CAFile: "/nonexistent/ca.crt"}, "/nonexistent/ca.crt"},
		{"mismatched key", mtls.Config{CertFile: pki.Client.Cert, KeyFile: pki.Server.Key, CAFile: pki.CA.File}, pki.Client.Cert},
		{"CA file without a certificate", mtls.Config{CertFile: pki.Server.Cert, KeyFile: pki.Server.Key, CAFile: pki.Server.Key}, "no PEM certificate"},
		{"CA file cut short", mtls.Config{CertFile: pki.Server.Cert, KeyFile: pki.Server.Key, CAFile: truncated(t, pki.CA.File)}, "cut short"},
		{"no key", mtls.Config{CertFile: pki.Server.Cert, CAFile: pki.CA.File}, "all three"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := mtls.Load(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Load: %v, want an error with %q", err, tt.wantIn)
			}
		})
	}
}

// truncated writes the first half of file into a new file, as a writer
// caught in the middle would leave it.
func truncated(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(t.TempDir(), "half.pem")
	if err := os.WriteFile(half, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	return half
}

// TestHandshake pairs the two configurations over loopback TCP.
func TestHandshake(t *testing.T) {
	pki := mtlstest.New(t)
	tests := []struct {
		name    string
		client  mtlstest.Pair
		ca      string
		server  mtlstest.Pair
		wantErr string // in the client's or the server's error; "" for success
	}{
		{"valid", pki.Client, pki.CA.File, pki.Server, ""},
		{"expired client", pki.Expired, pki.CA.File, pki.Server, "expired"},
		{"client of another CA", pki.OtherClient, pki.CA.File, pki.Server, "unknown authority"},
		{"server of another CA", pki.Client, pki.CA.File, pki.OtherServer, "unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sf, err := mtls.Load(mtls.Config{CertFile: tt.server.Cert, KeyFile: tt.server.Key, CAFile: pki.CA.File})
			if err != nil {
				t.Fatal(err)
			}
			cf, err := mtls.Load(mtls.Config{CAFile: tt.ca, CertFile: tt.client.Cert, KeyFile: tt.client.Key})
			if err != nil {
				t.Fatal(err)
			}
			scfg, ccfg := sf.ServerConfig(), cf.ClientConfig()
			ccfg.ServerName = "127.0.0.1"
			l, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			serr := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					serr <- err
					return
				}
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				serr <- c.(*tls.Conn).Handshake()
			}()
			d := &net.Dialer{Timeout: 10 * time.Second}
			c, cerr := tls.DialWithDialer(d, "tcp", l.Addr().String(), ccfg)
			if cerr == nil {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, cerr = c.Read(make([]byte, 1)) // TLS 1.3: the server's verdict on the client comes after
				if errors.Is(cerr, net.ErrClosed) || cerr != nil && strings.Contains(cerr.Error(), "EOF") {
					cerr = nil
				}
				_ = c.Close()
			}
			err = errors.Join(cerr, <-serr)
			if tt.wantErr == "" && err != nil {
				t.Errorf("handshake: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("handshake: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestLoopbackHost: localhost and every loopback IP, nothing else; names
// other than "localhost" are not resolved.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "127.255.0.9": true, "::1": true, "::ffff:127.0.0.1": true,
		"": false, "LOCALHOST.example": false, "10.0.0.1": false, "0.0.0.0": false, "::": false, "fd00::1": false, "[::1]": false,
	} {
		if got := mtls.LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
