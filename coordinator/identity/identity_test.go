package identity_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
)

// peerWith is a stream context whose peer's TLS handshake verified the
// chain of cert (nil: TLS without a verified chain); plaintext if !isTLS.
func peerWith(cert *x509.Certificate, isTLS bool) context.Context {
	p := &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}}
	if isTLS {
		var st tls.ConnectionState
		if cert != nil {
			st.PeerCertificates = []*x509.Certificate{cert}
			st.VerifiedChains = [][]*x509.Certificate{{cert}}
		}
		p.AuthInfo = credentials.TLSInfo{State: st}
	}
	return peer.NewContext(context.Background(), p)
}

// TestCertificate: the verified client certificate's node URI SAN proves
// its node; an API client certificate, several node SANs, a plaintext
// connection or an unverified certificate prove none.
func TestCertificate(t *testing.T) {
	pki := mtlstest.New(t)
	unverified := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{mtlstest.Cert(t, pki.CA.IssueNode(t, "node-u").Cert)}}}})
	tests := []struct {
		name     string
		ctx      context.Context
		wantNode string
		wantErr  error
		wantIn   string
	}{
		{"agent certificate", peerWith(mtlstest.Cert(t, pki.CA.IssueNode(t, "node-a").Cert), true), "node-a", nil, ""},
		{"API client certificate", peerWith(mtlstest.Cert(t, pki.Client.Cert), true), "", identity.ErrNoProof, "an API client certificate cannot register"},
		{"two node SANs", peerWith(mtlstest.Cert(t, pki.CA.IssueURIs(t, "two", mtls.NodeURI("node-a"), mtls.NodeURI("node-b")).Cert), true),
			"", identity.ErrRefused, "2 node URI SANs"},
		{"plaintext", peerWith(nil, false), "", identity.ErrNoProof, "not TLS"},
		{"no verified chain", unverified, "", identity.ErrNoProof, "no verified client certificate"},
		{"no peer", context.Background(), "", identity.ErrNoProof, "no peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := identity.Certificate{}.Verify(tt.ctx)
			if node != tt.wantNode || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Verify = %q, %v; want %q, %v", node, err, tt.wantNode, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Verify: %v, want %q in it", err, tt.wantIn)
			}
		})
	}
}

// fixed is a Verifier with a fixed answer.
type fixed struct {
	node string
	err  error
}

func (f fixed) Verify(context.Context) (string, error) { return f.node, f.err }

// TestAnyOf: the first proof wins; without one, the error says the
// gravest reason (unavailable, then refused, then no proof) and all of
// them.
func TestAnyOf(t *testing.T) {
	noProof := fixed{err: errors.Join(identity.ErrNoProof, errors.New("no token"))}
	refused := fixed{err: errors.Join(identity.ErrRefused, errors.New("pod of another DaemonSet"))}
	down := fixed{err: errors.Join(identity.ErrUnavailable, errors.New("API down"))}
	tests := []struct {
		name     string
		vs       identity.AnyOf
		wantNode string
		wantErr  error
	}{
		{"second proves", identity.AnyOf{noProof, fixed{node: "node-a"}}, "node-a", nil},
		{"first proves", identity.AnyOf{fixed{node: "node-b"}, refused}, "node-b", nil},
		{"none proves", identity.AnyOf{noProof, noProof}, "", identity.ErrNoProof},
		{"one refused", identity.AnyOf{noProof, refused}, "", identity.ErrRefused},
		{"one could not check", identity.AnyOf{refused, down}, "", identity.ErrUnavailable},
		{"empty", identity.AnyOf{}, "", identity.ErrNoProof},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := tt.vs.Verify(context.Background())
			if node != tt.wantNode || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Verify = %q, %v; want %q, %v", node, err, tt.wantNode, tt.wantErr)
			}
		})
	}
}
