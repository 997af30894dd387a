package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/coordinator/kube"
)

// The values of Config.AgentIdentity: how an agent session on the TCP
// listener proves the node it registers as (coordinator/identity).
const (
	// IdentityAuto (or "") is IdentityCert with the TLS files, else
	// IdentityNone. (`serve --kubernetes` turns auto into IdentityToken.)
	IdentityAuto = "auto"
	// IdentityCert: the agent's client certificate names its node in the
	// URI SAN spiffe://meshperf/node/NODE. Needs the TLS files.
	IdentityCert = "cert"
	// IdentityToken: the agent's projected service-account token, checked
	// with the TokenReview API, is of a pod of AgentDaemonSet on the node.
	// Needs KubeClient.
	IdentityToken = "token"
	// IdentityTokenOrCert takes either proof. Needs KubeClient and the TLS
	// files.
	IdentityTokenOrCert = "token-or-cert"
	// IdentityNone checks nothing: any session registers as any node.
	IdentityNone = "none"
)

// agentIdentity returns the Verifier of cfg.AgentIdentity (nil for none)
// and the mode it resolved to. tls says whether the TCP listener has
// mutual TLS. The token verifier's pod cache runs until ctx ends.
func (cfg *Config) agentIdentity(ctx context.Context, tls bool, log *slog.Logger) (identity.Verifier, string, error) {
	mode := cfg.AgentIdentity
	if mode == "" || mode == IdentityAuto {
		mode = IdentityNone
		if tls {
			mode = IdentityCert
		}
	}
	needs := func(what string, ok bool) error {
		if !ok {
			return fmt.Errorf("agent identity (--agent-identity) %q needs %s", mode, what)
		}
		return nil
	}
	token := func() (identity.Verifier, error) {
		ns := cfg.KubeNamespace
		if ns == "" {
			ns = kube.DefaultNamespace
		}
		pods, err := kube.NewAgentPods(ctx, kube.AgentPodsConfig{Client: cfg.KubeClient, Namespace: ns, Logger: log})
		if err != nil {
			return nil, err
		}
		return identity.NewToken(identity.TokenConfig{Client: cfg.KubeClient, Namespace: ns, DaemonSet: cfg.AgentDaemonSet,
			CacheTTL: cfg.IdentityCacheTTL, Pods: pods.Get, Logger: log})
	}
	switch mode {
	case IdentityNone:
		return nil, mode, nil
	case IdentityCert:
		if err := needs("--tls-cert, --tls-key and --tls-client-ca", tls); err != nil {
			return nil, "", err
		}
		return identity.Certificate{}, mode, nil
	case IdentityToken:
		if err := needs("--kubernetes", cfg.KubeClient != nil); err != nil {
			return nil, "", err
		}
		v, err := token()
		return v, mode, err
	case IdentityTokenOrCert:
		if err := errors.Join(needs("--kubernetes", cfg.KubeClient != nil), needs("--tls-cert, --tls-key and --tls-client-ca", tls)); err != nil {
			return nil, "", err
		}
		v, err := token()
		if err != nil {
			return nil, "", err
		}
		return identity.AnyOf{v, identity.Certificate{}}, mode, nil
	}
	return nil, "", fmt.Errorf("agent identity (--agent-identity) %q: want %s, %s, %s, %s or %s",
		cfg.AgentIdentity, IdentityAuto, IdentityCert, IdentityToken, IdentityTokenOrCert, IdentityNone)
}
