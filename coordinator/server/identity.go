package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator/identity"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// defaultRegisterTimeout bounds the wait for a session's Register when
// Config.RegisterTimeout is zero.
const defaultRegisterTimeout = 30 * time.Second

// errRefusedIdentity is the PermissionDenied status of a session that
// registered as a node it did not prove.
func errRefusedIdentity(reason string) error {
	return status.Error(codes.PermissionDenied, "registration refused: "+reason)
}

// provenStream is a session's stream whose first message, the Register,
// was read by Connect to check the node it names; Recv hands it over
// first, then reads on.
type provenStream struct {
	grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]
	first *agentv1.ConnectRequest
}

func (s *provenStream) Recv() (*agentv1.ConnectRequest, error) {
	if m := s.first; m != nil {
		s.first = nil
		return m, nil
	}
	return s.BidiStreamingServer.Recv()
}

// checkIdentity reads the session's first message and returns the stream
// to serve, or the refusal: the session proves no node, or its Register
// names another than the one it proved. A refusal is logged as a warning
// with the claimed and proven nodes, the peer's address and the reason.
// Nothing of a refused session reaches the registry.
func (s *Server) checkIdentity(stream grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) (*provenStream, error) {
	ctx := stream.Context()
	proven, verr := s.cfg.Identity.Verify(ctx)
	first, err := s.recvFirst(ctx, stream)
	if err != nil {
		return nil, err
	}
	claimed := first.GetRegister().GetNodeName()
	remote := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	refuse := func(reason string, err error) error {
		s.warnRefused(claimed, proven, remote, reason)
		if errors.Is(err, identity.ErrUnavailable) {
			return status.Error(codes.Unavailable, "registration not checked: "+reason)
		}
		return errRefusedIdentity(reason)
	}
	switch {
	case first.GetRegister() == nil:
		// The registry says what is wrong with it; it registers nothing.
		return &provenStream{BidiStreamingServer: stream, first: first}, nil
	case verr != nil:
		return nil, refuse(verr.Error(), verr)
	case claimed != proven:
		return nil, refuse("Register names node "+quote(claimed)+" and the session proved node "+quote(proven), identity.ErrRefused)
	}
	s.log.Debug("agent identity proven", "node", proven, "remote", remote)
	return &provenStream{BidiStreamingServer: stream, first: first}, nil
}

// warnRefused logs a refused registration, rate-limited (lograte).
func (s *Server) warnRefused(claimed, proven, remote, reason string) {
	s.refusals.Warn(s.log, s.cfg.Now(), "agent registration refused: the session did not prove the node it claims",
		"claimed_node", claimed, "proven_node", proven, "remote", remote, "reason", reason)
}

// recvFirst reads the session's first message within RegisterTimeout.
func (s *Server) recvFirst(ctx context.Context, stream grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) (*agentv1.ConnectRequest, error) {
	type recv struct {
		m   *agentv1.ConnectRequest
		err error
	}
	c := make(chan recv, 1)
	go func() { // owner: Connect; Recv returns at the latest when Connect returns and gRPC ends the stream
		m, err := stream.Recv()
		c <- recv{m, err}
	}()
	timeout := s.cfg.RegisterTimeout
	if timeout == 0 {
		timeout = defaultRegisterTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-c:
		if r.err != nil {
			return nil, r.err
		}
		return r.m, nil
	case <-t.C:
		return nil, status.Errorf(codes.DeadlineExceeded, "no Register within %v", timeout)
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func quote(s string) string { return "\"" + s + "\"" }
