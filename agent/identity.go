package agent

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/protocol"
)

// maxIdentityToken bounds the identity token file: a service-account JWT
// is a few KiB.
const maxIdentityToken = 64 << 10

// withIdentity returns ctx carrying the agent's identity token in the
// Connect metadata, read anew from IdentityTokenFile (the kubelet rotates
// it in place); ctx itself without a file. The token is never logged.
func (a *Agent) withIdentity(ctx context.Context) (context.Context, error) {
	if a.cfg.IdentityTokenFile == "" {
		return ctx, nil
	}
	tok, err := readIdentityToken(a.cfg.IdentityTokenFile)
	if err != nil {
		return nil, err
	}
	return metadata.AppendToOutgoingContext(ctx, protocol.IdentityTokenMetadata, tok), nil
}

// readIdentityToken reads the token in file: one line, at most
// maxIdentityToken bytes.
func readIdentityToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("identity token (--identity-token-file): %w", err)
	}
	if len(b) > maxIdentityToken {
		return "", fmt.Errorf("identity token (--identity-token-file) %s is %d bytes, above %d", file, len(b), maxIdentityToken)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("identity token (--identity-token-file) %s is empty", file)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("identity token (--identity-token-file) %s holds white space inside the token: want one line", file)
	}
	return tok, nil
}

// checkCertNode checks at start that the client certificate in certFile
// is for node: one naming another node is an error (the coordinator would
// refuse every registration), one naming none is logged, as a coordinator
// that proves identities by certificate refuses it.
func checkCertNode(certFile, node string, tokenFile bool, log *slog.Logger) error {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return fmt.Errorf("client certificate (--tls-cert): %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return fmt.Errorf("client certificate (--tls-cert) %s: no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("client certificate (--tls-cert) %s: %w", certFile, err)
	}
	got, err := mtls.NodeOf(cert)
	switch {
	case errors.Is(err, mtls.ErrNoNodeSAN):
		logf := log.Warn
		if tokenFile { // the token proves the node
			logf = log.Info
		}
		logf("the client certificate names no node: a coordinator with --agent-identity=cert refuses this agent",
			"cert", certFile, "want_uri_san", mtls.NodeURI(node))
		return nil
	case err != nil:
		return fmt.Errorf("client certificate (--tls-cert) %s: %w", certFile, err)
	case got != node:
		return fmt.Errorf("client certificate (--tls-cert) %s is for node %q (URI SAN %s) and this agent is node (--node) %q: the coordinator would refuse it",
			certFile, got, mtls.NodeURI(got), node)
	}
	return nil
}
