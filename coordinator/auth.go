package coordinator

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// meshMethodPrefix starts the full method name of every MeshService call:
// the calls the API token guards.
var meshMethodPrefix = "/" + meshv1.MeshService_ServiceDesc.ServiceName + "/"

// readToken reads the API token from file: its content without the
// surrounding white space (a trailing newline), which must not be empty.
func readToken(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("API token (--api-token-file): %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, fmt.Errorf("API token (--api-token-file) %s is empty", file)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("API token (--api-token-file) %s holds white space inside the token: want one line", file)
	}
	return []byte(tok), nil
}

// tokenAuth checks the "authorization: Bearer TOKEN" metadata of every
// MeshService call; AgentService (authenticated by the client certificate)
// and the health service (open for probes) pass without it.
type tokenAuth struct {
	sum [sha256.Size]byte // of the token: compared at a fixed length
	log *slog.Logger
}

func newTokenAuth(token []byte, log *slog.Logger) *tokenAuth {
	return &tokenAuth{sum: sha256.Sum256(token), log: log}
}

// check returns nil when method needs no token or ctx carries the right
// one, and a codes.Unauthenticated status otherwise.
func (a *tokenAuth) check(ctx context.Context, method string) error {
	if !strings.HasPrefix(method, meshMethodPrefix) {
		return nil
	}
	refuse := func(why string) error {
		remote := ""
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			remote = p.Addr.String()
		}
		a.log.Warn("API call refused", "method", method, "remote", remote, "reason", why)
		return status.Errorf(codes.Unauthenticated, "%s: MeshService on the TCP listener needs the metadata \"authorization: Bearer TOKEN\" with the coordinator's API token (coordinator CLI: --token-file or $MESHPERF_TOKEN)", why)
	}
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) == 0 {
		return refuse("no API token")
	}
	if len(vals) > 1 {
		return refuse("more than one authorization value")
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return refuse("authorization is not a bearer token")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(sum[:], a.sum[:]) != 1 {
		return refuse("wrong API token")
	}
	return nil
}

func (a *tokenAuth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *tokenAuth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
