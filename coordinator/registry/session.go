package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// actionKind is the kind of a Work's action, matched with the kind of the
// WorkResult's outcome.
type actionKind int

const (
	actionStartServer actionKind = iota + 1
	actionRunClient
	actionStopServer
)

type pendingKey struct {
	testID string
	kind   actionKind
}

func workKind(w *agentv1.Work) (actionKind, error) {
	switch w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		return actionStartServer, nil
	case *agentv1.Work_RunClient:
		return actionRunClient, nil
	case *agentv1.Work_StopServer:
		return actionStopServer, nil
	}
	return 0, fmt.Errorf("work %q has no action", w.GetTestId())
}

func resultKind(r *agentv1.WorkResult) (actionKind, bool) {
	switch r.GetOutcome().(type) {
	case *agentv1.WorkResult_ServerStarted:
		return actionStartServer, true
	case *agentv1.WorkResult_ClientDone:
		return actionRunClient, true
	case *agentv1.WorkResult_ServerStopped:
		return actionStopServer, true
	}
	return 0, false
}

// session is one agent's stream. Only Serve's goroutine sends on the stream.
type session struct {
	node           Node
	out            chan *agentv1.Work
	endpointsDirty chan struct{}
	done           chan struct{} // closed by end
	endOnce        sync.Once
	endErr         error

	mu      sync.Mutex
	pending map[pendingKey]chan *agentv1.WorkResult
	seen    time.Time
}

func (s *session) end(err error) {
	s.endOnce.Do(func() {
		s.endErr = err
		close(s.done)
	})
}

func (s *session) touch(t time.Time) {
	s.mu.Lock()
	s.seen = t
	s.mu.Unlock()
}

func (s *session) lastSeen() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// call queues w and waits for its answer.
func (s *session) call(ctx context.Context, key pendingKey, w *agentv1.Work) (*agentv1.WorkResult, error) {
	ch := make(chan *agentv1.WorkResult, 1)
	s.mu.Lock()
	if _, dup := s.pending[key]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("node %q: work %q of kind %d is already in flight", s.node.Name, key.testID, key.kind)
	}
	s.pending[key] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, key)
		s.mu.Unlock()
	}()

	select {
	case s.out <- w:
	case <-s.done:
		return nil, s.goneErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-ch:
		return r, nil
	case <-s.done:
		return nil, s.goneErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *session) goneErr() error {
	return fmt.Errorf("node %q: %w: session ended: %v", s.node.Name, ErrAgentUnavailable, s.endErr)
}

// deliver hands a WorkResult to its waiting caller without ever blocking;
// it reports false if nobody waits (a late answer after the caller gave
// up) or an answer for that work was already delivered.
func (s *session) deliver(r *agentv1.WorkResult) bool {
	kind, ok := resultKind(r)
	if !ok {
		return false
	}
	s.mu.Lock()
	ch, ok := s.pending[pendingKey{testID: r.GetTestId(), kind: kind}]
	s.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case ch <- r: // buffered 1: the first answer wins
		return true
	default: // a duplicate answer: never block the session on it
		return false
	}
}

// Serve runs one agent session on stream until the agent leaves, its
// heartbeats stop, a newer session of the same node replaces it, or ctx
// ends. The first message must be a Register; the error then wraps
// ErrVersionMismatch or ErrBadRegistration. Other endings return
// ErrHeartbeatTimeout, ErrReplaced, ctx's error, a stream error, or nil when
// the agent closed its side.
func (r *Registry) Serve(ctx context.Context, stream Stream) error {
	recvC := make(chan *agentv1.ConnectRequest)
	recvErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	// lastRecv is when the agent last sent anything, stamped on arrival so
	// that a busy session loop never mistakes a live agent for a dead one.
	var lastRecv atomic.Int64
	lastRecv.Store(time.Now().UnixNano())
	go func() { // owner: Serve; ends when Recv fails, which it does once Serve returns and gRPC cancels the stream
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			lastRecv.Store(time.Now().UnixNano())
			select {
			case recvC <- m:
			case <-stop:
				return
			}
		}
	}()

	first := time.NewTimer(r.cfg.HeartbeatTimeout)
	defer first.Stop()
	var reg *agentv1.Register
	select {
	case m := <-recvC:
		if reg = m.GetRegister(); reg == nil {
			return fmt.Errorf("%w: the first message must be a Register", ErrBadRegistration)
		}
	case err := <-recvErr:
		return fmt.Errorf("before registration: %w", err)
	case <-first.C:
		return fmt.Errorf("%w: no Register within %v", ErrHeartbeatTimeout, r.cfg.HeartbeatTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	node, err := validateRegister(reg)
	if err != nil {
		return err
	}
	if other := r.conflict(node); other != "" {
		return fmt.Errorf("%w: node %q announces an address that connected node %q registered", ErrBadRegistration, node.Name, other)
	}
	s := &session{
		node: node, out: make(chan *agentv1.Work, 16), endpointsDirty: make(chan struct{}, 1),
		done: make(chan struct{}), pending: map[pendingKey]chan *agentv1.WorkResult{}, seen: time.Now(),
	}
	// Attach before answering, so that the agent is dispatchable as soon
	// as it knows it is registered.
	if err := r.attach(ctx, s, reg); err != nil {
		return err
	}
	err = stream.Send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
		CoordinatorVersion: r.cfg.Version,
		HeartbeatInterval:  durationpb.New(r.cfg.HeartbeatInterval),
		HeartbeatTimeout:   durationpb.New(r.cfg.HeartbeatTimeout),
	}}})
	if err != nil {
		err = fmt.Errorf("send registered: %w", err)
		r.detach(ctx, s)
		s.end(err)
		return err
	}
	log := r.log.With("node", node.Name)
	log.Info("agent registered", "version", reg.GetAgentVersion(), "host_ip", node.HostIP, "pod_ip", node.PodIP, "service_ip", node.ServiceIP)
	err = r.loop(ctx, stream, s, recvC, recvErr, &lastRecv)
	r.detach(ctx, s) // first: whoever sees the session end sees the node gone
	s.end(err)
	log.Info("agent session ended", "err", err)
	return err
}

func (r *Registry) loop(ctx context.Context, stream Stream, s *session, recvC <-chan *agentv1.ConnectRequest, recvErr <-chan error, lastRecv *atomic.Int64) error {
	heartbeat := time.NewTicker(r.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	watchdog := time.NewTimer(r.cfg.HeartbeatTimeout)
	defer watchdog.Stop()
	send := func(m *agentv1.ConnectResponse) error {
		if err := stream.Send(m); err != nil {
			return fmt.Errorf("send to agent: %w", err)
		}
		return nil
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return s.endErr
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("receive from agent: %w", err)
		case m := <-recvC:
			s.touch(time.Now())
			if wr := m.GetWorkResult(); wr != nil && !s.deliver(wr) {
				r.log.Warn("work result nobody waits for", "node", s.node.Name, "test_id", wr.GetTestId())
			}
		case <-watchdog.C:
			silent := time.Since(time.Unix(0, lastRecv.Load()))
			if silent >= r.cfg.HeartbeatTimeout {
				return fmt.Errorf("%w: nothing from the agent for %v", ErrHeartbeatTimeout, silent.Round(time.Millisecond))
			}
			watchdog.Reset(r.cfg.HeartbeatTimeout - silent)
		case <-heartbeat.C:
			err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Heartbeat{Heartbeat: &agentv1.Heartbeat{SendTime: timestamppb.Now()}}})
		case <-s.endpointsDirty:
			err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: r.endpoints()}})
		case w := <-s.out:
			// Endpoints first: the agent checks a Work's target against them.
			select {
			case <-s.endpointsDirty:
				if err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: r.endpoints()}}); err != nil {
					return err
				}
			default:
			}
			err = send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Work{Work: w}})
		}
		if err != nil {
			return err
		}
	}
}
