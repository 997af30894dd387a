package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// TestClientSecurity runs the real coordinator with mTLS and an API token
// and drives it through the CLI over TCP and over the socket.
func TestClientSecurity(t *testing.T) {
	pki := mtlstest.New(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	wrong := filepath.Join(dir, "wrong")
	for f, v := range map[string]string{token: "right-token\n", wrong: "wrong-token\n"} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	sock := filepath.Join(dir, "c.sock")
	ready := make(chan struct{})
	testutil.Run(t, testnet.Ctx(t, time.Minute), "coordinator.Run", ready, func(ctx context.Context) error {
		return coordinator.Run(ctx, coordinator.Config{
			ListenAddress: addr, SocketPath: sock, DBPath: filepath.Join(dir, "db"), Ready: func() { close(ready) },
			TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File, APITokenFile: token,
			AllowAddresses: []registry.AddressClass{registry.ClassLoopback}, // the test's agents register 127.0.0.x
		})
	})
	tlsFlags := []string{"--tls-ca", pki.CA.File, "--tls-cert", pki.Client.Cert, "--tls-key", pki.Client.Key}
	tcp := func(args ...string) []string { return append([]string{"--coordinator", addr}, args...) }
	tests := []struct {
		name    string
		env     string // $MESHPERF_TOKEN
		args    []string
		wantErr string // "" for success
	}{
		{"tcp with token file", "", tcp(append(tlsFlags, "--token-file", token, "agents")...), ""},
		{"tcp with token in env", "right-token", tcp(append(tlsFlags, "agents")...), ""},
		{"tcp without token", "", tcp(append(tlsFlags, "agents")...), "no API token"},
		{"tcp wrong token", "", tcp(append(tlsFlags, "--token-file", wrong, "agents")...), "wrong API token"},
		{"trigger without token", "", tcp(append(tlsFlags, "trigger")...), "no API token"},
		{"trigger with token", "", tcp(append(tlsFlags, "--token-file", token, "trigger")...), "no node pair"}, // past the check
		{"tcp without client certificate", "right-token", tcp("--tls-ca", pki.CA.File, "agents"), "without --tls-cert, --tls-key"},
		{"token without TLS", "", tcp("--token-file", token, "agents"), "only sent over TLS"},
		{"plaintext to a TLS listener", "", tcp("--timeout", "2s", "agents"), "Unavailable"},
		{"socket without token", "", []string{"--coordinator", sock, "agents"}, ""},
		{"socket with env token", "wrong-token", []string{"--coordinator", sock, "agents"}, ""},
		{"socket with TLS flags", "", append([]string{"--coordinator", sock}, append(tlsFlags, "agents")...), "unix socket"},
		{"serve with a client flag", "", []string{"serve", "--tls-ca", pki.CA.File}, "--tls-ca is a client flag"},
		{"serve with half the TLS flags", "", []string{"serve", "--listen", "127.0.0.1:0", "--socket", "", "--metrics-listen", "",
			"--db", filepath.Join(dir, "db2"), "--tls-cert", pki.Server.Cert}, "--tls-cert given without --tls-key, --tls-client-ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(TokenEnv, tt.env)
			var out, errOut bytes.Buffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs(tt.args)
			err := cmd.ExecuteContext(testnet.Ctx(t, 30*time.Second))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("%v: %v\n%s", tt.args, err, errOut.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: %v, want an error with %q", tt.args, err, tt.wantErr)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}
