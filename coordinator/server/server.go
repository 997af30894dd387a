// Package server is the coordinator's thin gRPC adapter: it validates
// requests, calls the registry, the run manager and the store, and maps
// their errors to gRPC status codes in one place (grpcError).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/coordinator/protoconv"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/lograte"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// Config wires the adapter to the domain.
type Config struct {
	// Registry serves agent sessions and lists agents.
	Registry *registry.Registry
	// Runs triggers and follows runs.
	Runs *runs.Manager
	// Store answers result queries.
	Store *store.Store
	// Identity, if set, proves the node of each agent session: Connect
	// refuses (PermissionDenied) a Register whose node_name is not the
	// node proven, before anything reaches the Registry. Nil means any
	// session registers as any node (the plaintext lab, or a listener
	// only root reaches).
	Identity identity.Verifier
	// RegisterTimeout bounds the wait for a session's Register when
	// Identity is set; zero means 30 s.
	RegisterTimeout time.Duration
	// Logger receives refused registrations (at most one warning a
	// second, with the count of those suppressed); nil means discard.
	Logger *slog.Logger
	// Now is the clock of the refusal warnings' rate limit; nil means
	// time.Now.
	Now func() time.Time
}

// Server implements AgentService and MeshService.
type Server struct {
	agentv1.UnimplementedAgentServiceServer
	meshv1.UnimplementedMeshServiceServer
	cfg Config
	log *slog.Logger

	refusals lograte.Bucket
}

// New returns a Server; Register it on a grpc.Server.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, log: log}
}

// Register registers both services on g.
func (s *Server) Register(g *grpc.Server) {
	agentv1.RegisterAgentServiceServer(g, s)
	meshv1.RegisterMeshServiceServer(g, s)
}

// Connect runs one agent session; with Config.Identity, only as the node
// the session proved.
func (s *Server) Connect(stream grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error {
	var rs registry.Stream = stream
	if s.cfg.Identity != nil {
		ps, err := s.checkIdentity(stream)
		if err != nil {
			return err
		}
		rs = ps
	}
	err := s.cfg.Registry.Serve(stream.Context(), rs)
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return grpcError(err)
}

// TriggerRun plans and starts a run.
func (s *Server) TriggerRun(ctx context.Context, req *meshv1.TriggerRunRequest) (*meshv1.TriggerRunResponse, error) {
	spec := req.GetSpec()
	if spec == nil {
		spec = &measurev1.RunSpec{}
	}
	if testspec.IsContinuous(spec.GetLabel()) {
		return nil, status.Errorf(codes.InvalidArgument, "label %.72q: the prefix %q is the continuous monitor's (its runs are the mesh's standing verdict); choose another label",
			spec.GetLabel(), testspec.ContinuousLabelPrefix)
	}
	run, err := s.cfg.Runs.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.TriggerRunResponse{Run: run}, nil
}

// GetRun returns a run.
func (s *Server) GetRun(ctx context.Context, req *meshv1.GetRunRequest) (*meshv1.GetRunResponse, error) {
	if err := checkRunID(req.GetRunId()); err != nil {
		return nil, err
	}
	run, err := s.cfg.Runs.Get(ctx, req.GetRunId())
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.GetRunResponse{Run: run}, nil
}

// WatchRun streams a run's progress until it ends.
func (s *Server) WatchRun(req *meshv1.WatchRunRequest, stream grpc.ServerStreamingServer[meshv1.WatchRunResponse]) error {
	if err := checkRunID(req.GetRunId()); err != nil {
		return err
	}
	ctx := stream.Context()
	updates, err := s.cfg.Runs.Watch(ctx, req.GetRunId())
	if err != nil {
		return grpcError(err)
	}
	for {
		select {
		case <-ctx.Done():
			return grpcError(ctx.Err())
		case u, ok := <-updates:
			if !ok {
				return nil
			}
			if u.Lagged {
				return status.Errorf(codes.ResourceExhausted, "run %s: this watcher fell too far behind; call WatchRun again", req.GetRunId())
			}
			if err := stream.Send(&meshv1.WatchRunResponse{Run: u.Run, Results: u.Results}); err != nil {
				return err
			}
		}
	}
}

// CancelRun cancels a queued or running run (runs.Manager.Cancel), noting
// who asked (caller); an ended run comes back unchanged. InvalidArgument
// for an empty run_id, NotFound for an unknown run.
func (s *Server) CancelRun(ctx context.Context, req *meshv1.CancelRunRequest) (*meshv1.CancelRunResponse, error) {
	if err := checkRunID(req.GetRunId()); err != nil {
		return nil, err
	}
	run, err := s.cfg.Runs.Cancel(ctx, req.GetRunId(), caller(ctx))
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.CancelRunResponse{Run: run}, nil
}

// caller names who makes a call, for the run's message: the subject of
// its TLS client certificate and its address on the TCP listener, "a
// local client" on the unix socket (or without peer information).
func caller(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil || p.Addr.Network() == "unix" {
		return "a local client"
	}
	who := "the client at " + p.Addr.String()
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		if cn := info.State.PeerCertificates[0].Subject.CommonName; cn != "" {
			if len(cn) > 64 {
				cn = cn[:64] // %q below escapes a cut rune
			}
			who = fmt.Sprintf("%q (client certificate) at %s", cn, p.Addr)
		}
	}
	return who
}

// ListResults returns one page of stored results.
func (s *Server) ListResults(ctx context.Context, req *meshv1.ListResultsRequest) (*meshv1.ListResultsResponse, error) {
	f, err := listFilter(req.GetSrcNode(), req.GetDstNode(), req.GetPath(), req.GetTest(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	if id := req.GetRunId(); id != "" {
		if err := checkRunID(id); err != nil {
			return nil, err
		}
	}
	f.RunID, f.IPFamily = req.GetRunId(), req.GetIpFamily()
	if f := req.GetIpFamily(); f != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		if err := protocol.ValidateFamilies("ip_family", []measurev1.IPFamily{f}); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
	}
	switch o := req.GetOrigin(); o {
	case measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED, measurev1.RunOrigin_RUN_ORIGIN_CLIENT, measurev1.RunOrigin_RUN_ORIGIN_MONITOR:
		f.Origin = o
	default:
		return nil, status.Errorf(codes.InvalidArgument, "origin %d is not a run origin", o)
	}
	results, next, err := s.cfg.Store.ListResults(ctx, f, int(min(req.GetPageSize(), math.MaxInt32)), req.GetPageToken())
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.ListResultsResponse{Results: results, NextPageToken: next}, nil
}

// ListAgents lists the known agents.
func (s *Server) ListAgents(context.Context, *meshv1.ListAgentsRequest) (*meshv1.ListAgentsResponse, error) {
	return &meshv1.ListAgentsResponse{Agents: s.cfg.Registry.Agents()}, nil
}

// SetMaintenance cordons or uncordons a node.
func (s *Server) SetMaintenance(ctx context.Context, req *meshv1.SetMaintenanceRequest) (*meshv1.SetMaintenanceResponse, error) {
	if req.GetNodeName() == "" {
		return nil, status.Error(codes.InvalidArgument, "node_name is empty")
	}
	a, err := s.cfg.Registry.SetMaintenance(ctx, req.GetNodeName(), req.GetMaintenance())
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.SetMaintenanceResponse{Agent: a}, nil
}

// ListRollups returns one page of hourly rollups.
func (s *Server) ListRollups(ctx context.Context, req *meshv1.ListRollupsRequest) (*meshv1.ListRollupsResponse, error) {
	size, err := pageSize(req.GetPageSize(), req.GetLimit(), store.MaxRollupsPageSize) //nolint:staticcheck // limit: the deprecated page_size
	if err != nil {
		return nil, err
	}
	f, err := listFilter(req.GetSrcNode(), req.GetDstNode(), req.GetPath(), req.GetTest(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	rollups, next, err := s.cfg.Store.ListRollups(ctx, f, size, req.GetPageToken())
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.ListRollupsResponse{Rollups: rollups, NextPageToken: next}, nil
}

// ListExternalTargets returns the allowlist of external targets, sorted
// by name.
func (s *Server) ListExternalTargets(context.Context, *meshv1.ListExternalTargetsRequest) (*meshv1.ListExternalTargetsResponse, error) {
	return &meshv1.ListExternalTargetsResponse{ExternalTargets: protoconv.Clones(s.cfg.Registry.ExternalTargets())}, nil
}

// ListRuns returns one page of run headers, newest first.
func (s *Server) ListRuns(ctx context.Context, req *meshv1.ListRunsRequest) (*meshv1.ListRunsResponse, error) {
	size, err := pageSize(req.GetPageSize(), req.GetLimit(), store.MaxRunsPageSize) //nolint:staticcheck // limit: the deprecated page_size
	if err != nil {
		return nil, err
	}
	runs, next, err := s.cfg.Store.ListRuns(ctx, size, req.GetPageToken())
	if err != nil {
		return nil, grpcError(err)
	}
	return &meshv1.ListRunsResponse{Runs: runs, NextPageToken: next}, nil
}

// checkRunID checks a request's run_id: not empty, at most 253 bytes, no
// control character. The error is InvalidArgument quoting at most 64
// bytes of it.
func checkRunID(id string) error {
	switch {
	case id == "":
		return status.Error(codes.InvalidArgument, "run_id is empty")
	case len(id) > 253:
		return status.Errorf(codes.InvalidArgument, "run_id %.64q... is longer than 253 bytes", id)
	case strings.ContainsFunc(id, unicode.IsControl):
		return status.Errorf(codes.InvalidArgument, "run_id %.64q contains a control character", id)
	}
	return nil
}

// listFilter checks the filter fields ListResults and ListRollups share
// and makes a store.Filter of them: src_node and dst_node (empty: any;
// else a node or external target name, protocol.ValidateNodeName), path
// and test (unspecified or a known value), start_time and end_time
// (timeRange). Its errors are InvalidArgument naming the field.
func listFilter(src, dst string, path measurev1.Path, test measurev1.Test, start, end *timestamppb.Timestamp) (store.Filter, error) {
	for _, n := range []struct{ field, v string }{{"src_node", src}, {"dst_node", dst}} {
		if n.v == "" {
			continue
		}
		if err := protocol.ValidateNodeName(n.v); err != nil {
			return store.Filter{}, status.Errorf(codes.InvalidArgument, "%s: %v", n.field, err)
		}
	}
	if _, ok := measurev1.Path_name[int32(path)]; !ok {
		return store.Filter{}, status.Errorf(codes.InvalidArgument, "path %d is not a path", path)
	}
	if _, ok := measurev1.Test_name[int32(test)]; !ok {
		return store.Filter{}, status.Errorf(codes.InvalidArgument, "test %d is not a test", test)
	}
	since, until, err := timeRange(start, end)
	if err != nil {
		return store.Filter{}, err
	}
	return store.Filter{SrcNode: src, DstNode: dst, Path: path, Test: test, Since: since, Until: until}, nil
}

// timeRange checks a request's start_time and end_time (each unset, or a
// valid timestamp) and returns them as times, zero for unset. The error
// is InvalidArgument naming the field; the store checks the range.
func timeRange(start, end *timestamppb.Timestamp) (since, until time.Time, err error) {
	for _, b := range []struct {
		field string
		ts    *timestamppb.Timestamp
		dst   *time.Time
	}{{"start_time", start, &since}, {"end_time", end, &until}} {
		if b.ts == nil {
			continue
		}
		if err := b.ts.CheckValid(); err != nil {
			return time.Time{}, time.Time{}, status.Errorf(codes.InvalidArgument, "%s: %v", b.field, err)
		}
		*b.dst = b.ts.AsTime()
	}
	return since, until, nil
}

// pageSize is a request's page_size, or its deprecated limit when
// page_size is 0 (0 if both are: the store's default). A limit above
// maxN is INVALID_ARGUMENT naming limit; the store checks page_size.
func pageSize(size, limit uint32, maxN int) (int, error) {
	if size != 0 || limit == 0 {
		return int(min(size, math.MaxInt32)), nil
	}
	if int64(limit) > int64(maxN) {
		return 0, status.Errorf(codes.InvalidArgument, "limit %d is outside 1..%d", limit, maxN)
	}
	return int(limit), nil
}

// grpcError maps domain errors, wrapped or not, to gRPC status codes.
func grpcError(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, schedule.ErrInvalid), errors.Is(err, store.ErrInvalid),
		errors.Is(err, registry.ErrBadRegistration):
		code = codes.InvalidArgument
	case errors.Is(err, schedule.ErrNoPairs), errors.Is(err, registry.ErrVersionMismatch):
		code = codes.FailedPrecondition
	case errors.Is(err, runs.ErrNotFound), errors.Is(err, store.ErrNotFound), errors.Is(err, registry.ErrUnknownNode):
		code = codes.NotFound
	case errors.Is(err, registry.ErrHeartbeatTimeout), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, registry.ErrReplaced):
		code = codes.Aborted
	case errors.Is(err, registry.ErrAgentUnavailable), errors.Is(err, registry.ErrShutdown):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, runs.ErrTooBusy):
		code = codes.ResourceExhausted
	}
	return status.Error(code, fmt.Sprint(err))
}
