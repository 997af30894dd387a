// Package identity tells the coordinator which node an agent session
// proved it is, so that a session registers only as that node. A Verifier
// looks at the stream's context (the peer's TLS state, its metadata) and
// returns the proven node name, or an error saying why there is none:
//
//   - Certificate: the agent's mTLS client certificate names its node in
//     one URI SAN spiffe://meshperf/node/NODE (mtls.NodeOf). A certificate
//     without one (a remote user's API client certificate) proves nothing.
//   - Token: in a cluster, the agent presents its projected service-account
//     token (audience Audience) in the metadata MetadataKey; the
//     coordinator checks it with the TokenReview API, finds the token's pod,
//     and proves the pod's spec.nodeName if the pod belongs to the agent
//     DaemonSet.
//   - AnyOf: the first of several that proves a node.
//
// No Verifier (nil) is the plaintext lab: any session registers as any
// node. The API token of MeshService is another matter, kept apart: it
// proves no node, and an agent's identity drives no MeshService call.
package identity

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/protocol"
)

// MetadataKey is the gRPC metadata key of the agent's identity token on
// AgentService.Connect. Its value is a credential: never log it.
const MetadataKey = protocol.IdentityTokenMetadata

// Audience is the audience of the agent's projected service-account token:
// meant for the coordinator alone (the API server refuses it).
const Audience = "meshperf"

// Errors of Verify, wrapped with the reason.
var (
	// ErrNoProof means the session presented nothing that could prove a
	// node: no client certificate with a node SAN, no identity token.
	ErrNoProof = errors.New("no proof of a node identity")
	// ErrRefused means the session's proof is not valid or names no
	// agent of this cluster's DaemonSet.
	ErrRefused = errors.New("node identity refused")
	// ErrUnavailable means the proof could not be checked now (the API
	// server did not answer); the agent should try again.
	ErrUnavailable = errors.New("node identity cannot be checked now")
)

// Verifier returns the node the session of a stream proved.
type Verifier interface {
	// Verify returns the node name the session whose stream context is
	// ctx proved, or an error wrapping ErrNoProof, ErrRefused or
	// ErrUnavailable with the reason.
	Verify(ctx context.Context) (node string, err error)
}

// Certificate proves the node that the peer's verified mTLS client
// certificate names in its URI SAN spiffe://meshperf/node/NODE.
type Certificate struct{}

// Verify implements Verifier.
func (Certificate) Verify(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", fmt.Errorf("%w: no peer on the stream", ErrNoProof)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", fmt.Errorf("%w: the connection is not TLS", ErrNoProof)
	}
	// Only a chain the handshake verified against the client CA counts.
	if len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", fmt.Errorf("%w: no verified client certificate", ErrNoProof)
	}
	node, err := mtls.NodeOf(info.State.VerifiedChains[0][0])
	switch {
	case errors.Is(err, mtls.ErrNoNodeSAN):
		return "", fmt.Errorf("%w: %w (an API client certificate cannot register)", ErrNoProof, err)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return node, nil
}

// AnyOf proves the node that the first of its Verifiers proves, tried in
// order. If none does, the error joins theirs; it wraps ErrUnavailable if
// one could not check, else ErrRefused if one refused a proof, else
// ErrNoProof.
type AnyOf []Verifier

// Verify implements Verifier.
func (vs AnyOf) Verify(ctx context.Context) (string, error) {
	var errs []error
	for _, v := range vs {
		node, err := v.Verify(ctx)
		if err == nil {
			return node, nil
		}
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	for _, kind := range []error{ErrUnavailable, ErrRefused, ErrNoProof} {
		if errors.Is(err, kind) {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: %w", ErrNoProof, err)
}
