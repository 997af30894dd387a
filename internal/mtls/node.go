package mtls

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/meshperf/meshperf/internal/protocol"
)

// NodeURIPrefix starts the URI SAN that names the node an agent's client
// certificate is for: spiffe://meshperf/node/NODE, NODE the Kubernetes node
// name the agent registers as. A certificate carries exactly one such SAN;
// a remote user's (API client) certificate carries none, and so cannot
// register as any node.
const NodeURIPrefix = "spiffe://meshperf/node/"

// ErrNoNodeSAN means a certificate carries no node URI SAN: it is not an
// agent's (an API client certificate, or one issued before per-node
// identity).
var ErrNoNodeSAN = errors.New("certificate has no node URI SAN " + NodeURIPrefix + "NODE")

// ErrBadNodeSAN means a certificate's node URI SANs do not name one valid
// node: several of them, or a name that is no node name.
var ErrBadNodeSAN = errors.New("certificate's node URI SAN is unusable")

// NodeURI is the URI SAN of node's agent certificate.
func NodeURI(node string) string { return NodeURIPrefix + node }

// NodeOf returns the node that cert's URI SAN names (see NodeURIPrefix).
// A certificate without one is ErrNoNodeSAN; one with several, or with a
// node name that protocol.ValidateNodeName refuses, is ErrBadNodeSAN. Either
// error names the certificate's subject.
func NodeOf(cert *x509.Certificate) (string, error) {
	var nodes []string
	for _, u := range cert.URIs {
		if s := u.String(); strings.HasPrefix(s, NodeURIPrefix) {
			nodes = append(nodes, strings.TrimPrefix(s, NodeURIPrefix))
		}
	}
	switch {
	case len(nodes) == 0:
		return "", fmt.Errorf("%w (subject %q)", ErrNoNodeSAN, cert.Subject.String())
	case len(nodes) > 1:
		return "", fmt.Errorf("%w: %d node URI SANs %q (subject %q); want one", ErrBadNodeSAN, len(nodes), nodes, cert.Subject.String())
	}
	if err := protocol.ValidateNodeName(nodes[0]); err != nil {
		return "", fmt.Errorf("%w: URI SAN %q (subject %q): %w", ErrBadNodeSAN, NodeURI(nodes[0]), cert.Subject.String(), err)
	}
	return nodes[0], nil
}
