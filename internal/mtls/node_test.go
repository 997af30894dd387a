package mtls_test

import (
	"errors"
	"testing"

	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
)

// TestNodeOf: a client certificate names its node in exactly one URI SAN
// spiffe://meshperf/node/NODE; none (an API client's), several, another
// trust domain's or an invalid node name prove no node.
func TestNodeOf(t *testing.T) {
	pki := mtlstest.New(t)
	tests := []struct {
		name     string
		pair     mtlstest.Pair
		wantNode string
		wantErr  error
	}{
		{"one node SAN", pki.CA.IssueNode(t, "node-a"), "node-a", nil},
		{"node SAN among others", pki.CA.IssueURIs(t, "mixed", "spiffe://other/x", mtls.NodeURI("node-b")), "node-b", nil},
		{"API client certificate", pki.Client, "", mtls.ErrNoNodeSAN},
		{"another trust domain", pki.CA.IssueURIs(t, "other-domain", "spiffe://other/node/node-a"), "", mtls.ErrNoNodeSAN},
		{"two node SANs", pki.CA.IssueURIs(t, "two", mtls.NodeURI("node-a"), mtls.NodeURI("node-b")), "", mtls.ErrBadNodeSAN},
		{"the same node twice", pki.CA.IssueURIs(t, "twice", mtls.NodeURI("node-a"), mtls.NodeURI("node-a")), "", mtls.ErrBadNodeSAN},
		{"invalid node name", pki.CA.IssueURIs(t, "invalid", mtls.NodeURI("Node_A")), "", mtls.ErrBadNodeSAN},
		{"empty node name", pki.CA.IssueURIs(t, "empty", mtls.NodeURIPrefix), "", mtls.ErrBadNodeSAN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := mtls.NodeOf(mtlstest.Cert(t, tt.pair.Cert))
			if node != tt.wantNode || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("NodeOf = %q, %v; want %q, %v", node, err, tt.wantNode, tt.wantErr)
			}
		})
	}
}
