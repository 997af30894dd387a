package mtls_test

import (
	"crypto/tls"
	"errors"
	"net"
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
	if _, err := mtls.ServerConfig(pki.Server.Cert, pki.Server.Key, "/nonexistent/ca.crt"); err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.crt") {
		t.Errorf("missing CA: %v, want an error naming the file", err)
	}
	if _, err := mtls.ClientConfig(pki.CA.File, pki.Client.Cert, pki.Server.Key); err == nil || !strings.Contains(err.Error(), pki.Client.Cert) {
		t.Errorf("mismatched key: %v, want an error naming the files", err)
	}
	if _, err := mtls.ServerConfig(pki.Server.Cert, pki.Server.Key, pki.Server.Key); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("CA file without a certificate: %v", err)
	}
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
			scfg, err := mtls.ServerConfig(tt.server.Cert, tt.server.Key, pki.CA.File)
			if err != nil {
				t.Fatal(err)
			}
			ccfg, err := mtls.ClientConfig(tt.ca, tt.client.Cert, tt.client.Key)
			if err != nil {
				t.Fatal(err)
			}
			ccfg.ServerName = "127.0.0.1"
			l, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			serr := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					serr <- err
					return
				}
				defer c.Close()
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
