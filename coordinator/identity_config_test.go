package coordinator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
)

// TestAgentIdentityConfig: each identity mode needs what proves it, an
// unknown one is refused, and each error names the flag and the value;
// nothing is created before.
func TestAgentIdentityConfig(t *testing.T) {
	pki := mtlstest.New(t)
	tlsCfg := func(c coordinator.Config) coordinator.Config {
		c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = pki.Server.Cert, pki.Server.Key, pki.CA.File
		return c
	}
	tests := []struct {
		name   string
		cfg    coordinator.Config
		wantIn []string
	}{
		{"cert without TLS", coordinator.Config{AgentIdentity: coordinator.IdentityCert}, []string{`--agent-identity) "cert" needs --tls-cert`}},
		{"token without --kubernetes", tlsCfg(coordinator.Config{AgentIdentity: coordinator.IdentityToken}), []string{`"token" needs --kubernetes`}},
		{"token-or-cert without either", coordinator.Config{AgentIdentity: coordinator.IdentityTokenOrCert},
			[]string{"needs --kubernetes", "needs --tls-cert"}},
		{"token-or-cert without TLS", coordinator.Config{AgentIdentity: coordinator.IdentityTokenOrCert, KubeClient: fake.NewClientset()},
			[]string{"needs --tls-cert"}},
		{"unknown mode", coordinator.Config{AgentIdentity: "sans"}, []string{`"sans": want auto, cert, token, token-or-cert or none`}},
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

// TestAgentIdentityModes: which identity each configuration checks, as
// the coordinator logs it, and the warnings of the weak ones. The lab
// (plaintext, no --kubernetes) checks none and says that anyone registers
// as any node, as before.
func TestAgentIdentityModes(t *testing.T) {
	pki := mtlstest.New(t)
	withTLS := coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File}
	tests := []struct {
		name string
		cfg  coordinator.Config
		want []string // in the log
	}{
		{"plaintext lab", coordinator.Config{}, []string{"agent_identity=none", "plaintext and authenticates nobody: any host that reaches it can register as an agent"}},
		{"mTLS", withTLS, []string{"agent_identity=cert"}},
		{"mTLS, identity none", func() coordinator.Config { c := withTLS; c.AgentIdentity = coordinator.IdentityNone; return c }(),
			[]string{"agent_identity=none", "may register as any node"}},
		{"token over plaintext", coordinator.Config{AgentIdentity: coordinator.IdentityToken, KubeClient: fake.NewClientset()},
			[]string{"agent_identity=token", "identity tokens that cross the network in clear"}},
		{"token or cert", func() coordinator.Config {
			c := withTLS
			c.AgentIdentity, c.KubeClient = coordinator.IdentityTokenOrCert, fake.NewClientset()
			return c
		}(), []string{"agent_identity=token-or-cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, logs := start(t, tt.cfg)
			for _, w := range tt.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, logs)
				}
			}
		})
	}
}
