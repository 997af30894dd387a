package agent_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/identitytest"
	"github.com/meshperf/meshperf/internal/testutil/kubetest"
)

// TestIdentityTokenFile: an agent presents the token in
// --identity-token-file to a coordinator that checks tokens; its own
// pod's token registers it, another node's pod's token is refused, and
// the agent says so at error level while it retries.
func TestIdentityTokenFile(t *testing.T) {
	const ns = "meshperf"
	api := kubetest.NewClientset(
		identitytest.DaemonSet(ns, identity.DefaultDaemonSet),
		identitytest.Pod(ns, "meshperf-agent-1", "uid-1", "node-1", "DaemonSet", identity.DefaultDaemonSet),
		identitytest.Pod(ns, "meshperf-agent-2", "uid-2", "node-2", "DaemonSet", identity.DefaultDaemonSet),
		// node-1's Node, whose address its registration must carry.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}},
	)
	cluster := identitytest.New(api)
	tokenOf := func(pod, uid string) string {
		return cluster.Issue(identitytest.Token{Namespace: ns, ServiceAccount: "meshperf-agent", Pod: pod, PodUID: uid,
			Audiences: []string{identity.Audience}, Expires: time.Now().Add(time.Hour)})
	}
	tests := []struct {
		name      string
		token     string
		wantAgent string // in an agent error line; "" when it registers
	}{
		{"own pod's token", tokenOf("meshperf-agent-1", "uid-1"), ""},
		{"another node's pod's token", tokenOf("meshperf-agent-2", "uid-2"), `the session proved node \"node-2\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			coordLog := &testutil.SyncBuffer{}
			target, mesh, _ := startCoordinatorWith(t, func(c *coordinator.Config) {
				c.KubeClient, c.AgentIdentity = api, coordinator.IdentityToken
				c.Logger = slog.New(slog.NewTextHandler(coordLog, nil))
			})
			cfg := baseConfig(t, target, "node-1")
			cfg.IdentityTokenFile = testutil.TokenFile(t, tt.token)
			agentLog := captureLogs(&cfg)
			startAgent(t, cfg)
			if tt.wantAgent == "" {
				if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return connected(t, mesh, "node-1") }) {
					t.Fatalf("the agent never registered; agent log:\n%s\ncoordinator log:\n%s", agentLog, coordLog)
				}
			} else {
				found := testutil.Within(30*time.Second, 20*time.Millisecond, func() bool {
					for _, l := range strings.Split(agentLog.String(), "\n") {
						if strings.Contains(l, "level=ERROR") && strings.Contains(l, "refused this agent's node identity") && strings.Contains(l, tt.wantAgent) {
							return true
						}
					}
					return false
				})
				if !found {
					t.Errorf("agent log lacks an error line on the refused identity with %q:\n%s", tt.wantAgent, agentLog)
				}
				if connected(t, mesh, "node-1") {
					t.Error("the agent registered")
				}
			}
			if strings.Contains(agentLog.String(), tt.token) || strings.Contains(coordLog.String(), tt.token) {
				t.Error("the identity token is in a log")
			}
		})
	}
}

// TestIdentityConfigRefused: a certificate for another node, and an
// unusable token file, stop the agent at start with the flag named.
func TestIdentityConfigRefused(t *testing.T) {
	pki := mtlstest.New(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	twoLines := filepath.Join(dir, "two-lines")
	if err := os.WriteFile(twoLines, []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := pki.CA.IssueNode(t, "node-2")
	tests := []struct {
		name   string
		edit   func(*agent.Config)
		wantIn string
	}{
		{"certificate of another node", func(c *agent.Config) {
			c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile = other.Cert, other.Key, pki.CA.File
		}, `is for node "node-2"`},
		{"missing token file", func(c *agent.Config) { c.IdentityTokenFile = filepath.Join(dir, "none") }, "--identity-token-file"},
		{"empty token file", func(c *agent.Config) { c.IdentityTokenFile = empty }, "is empty"},
		{"token of two lines", func(c *agent.Config) { c.IdentityTokenFile = twoLines }, "want one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(t, "127.0.0.1:1", "node-1")
			tt.edit(&cfg)
			err := agent.Run(testnet.Ctx(t, 10*time.Second), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Run = %v, want an error with %q", err, tt.wantIn)
			}
		})
	}
}
