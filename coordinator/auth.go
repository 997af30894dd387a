package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator/apitoken"
	"github.com/meshperf/meshperf/internal/lograte"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/safetext"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// meshMethodPrefix starts the full method name of every MeshService call:
// the calls the API token guards.
var meshMethodPrefix = "/" + meshv1.MeshService_ServiceDesc.ServiceName + "/"

// readToken reads the API token from file (apitoken.Read).
func readToken(file string) ([]byte, error) { return apitoken.Read(file) }

// tokenAuth checks the "authorization: Bearer TOKEN" metadata of every
// MeshService call with the apitoken.Checker the web UI's API uses too;
// AgentService (authenticated by the client certificate) and the health
// service (open for probes) pass without it.
type tokenAuth struct {
	tokens   *apitoken.Checker
	log      *slog.Logger
	refusals lograte.Bucket
}

func newTokenAuth(token []byte, log *slog.Logger) *tokenAuth {
	return &tokenAuth{tokens: apitoken.New(token), log: log}
}

// check returns nil when method needs no token or ctx carries the right
// one, and a codes.Unauthenticated status otherwise.
func (a *tokenAuth) check(ctx context.Context, method string) error {
	if !strings.HasPrefix(method, meshMethodPrefix) {
		return nil
	}
	err := a.tokens.Check(metadata.ValueFromIncomingContext(ctx, "authorization"))
	if err == nil {
		return nil
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	a.refusals.Warn(a.log, time.Now(), "API call refused", "method", safetext.Cut(method, 128), "remote", remote, "reason", err.Error())
	return status.Errorf(codes.Unauthenticated, "%v: MeshService on the TCP listener needs the metadata \"authorization: Bearer TOKEN\" with the coordinator's API token (coordinator CLI: --token-file or $MESHPERF_TOKEN)", err)
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

// security loads the TCP listener's TLS configuration and the API token;
// nil means none.
func (cfg *Config) security(log *slog.Logger) (grpc.ServerOption, *tokenAuth, error) {
	on, err := mtls.AllOrNone(mtls.File{Flag: "tls-cert", Path: cfg.TLSCertFile}, mtls.File{Flag: "tls-key", Path: cfg.TLSKeyFile},
		mtls.File{Flag: "tls-client-ca", Path: cfg.TLSClientCAFile})
	if err != nil {
		return nil, nil, err
	}
	if (on || cfg.APITokenFile != "") && cfg.ListenAddress == "" {
		return nil, nil, errors.New("--tls-cert, --tls-key, --tls-client-ca and --api-token-file are for the TCP listener, and --listen is empty")
	}
	if cfg.APITokenFile != "" && !on {
		return nil, nil, errors.New("--api-token-file needs --tls-cert, --tls-key and --tls-client-ca: without TLS the token would cross the network in clear")
	}
	if !on {
		return nil, nil, nil
	}
	tlsLog := log.With("listener", cfg.ListenAddress)
	files, err := mtls.Load(mtls.Config{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, CAFile: cfg.TLSClientCAFile, Logger: tlsLog})
	if err != nil {
		return nil, nil, err
	}
	creds := grpc.Creds(mtls.ServerCredentials(files.ServerConfig(), tlsLog))
	if cfg.APITokenFile == "" {
		return creds, nil, nil
	}
	tok, err := readToken(cfg.APITokenFile)
	if err != nil {
		return nil, nil, err
	}
	return creds, newTokenAuth(tok, log), nil
}
