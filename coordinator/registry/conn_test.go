package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the harness of the session tests (session_test.go): a
// fake agent on one stream served by a registry.

// waitBound only turns a hang of the session tests into a failure.
const waitBound = 10 * time.Second

// fakeAgent is the agent's side of one session that Registry.Serve runs.
type fakeAgent struct {
	st     *chanStream
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve returned
	err    error         // Serve's error, once done is closed
}

// newRegistry is a registry for the session tests, shut down when the
// test ends. Its heartbeats go every second and never time out within a
// test: the fake agents send none.
func newRegistry(t *testing.T, cfg Config) *Registry {
	t.Helper()
	cfg.Recorder = memRecorder{}
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = time.Second, time.Hour
	r, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Shutdown)
	return r
}

// dial serves a new stream on r whose agent sends first, and returns the
// agent; the session ends (and Serve has returned) when the test ends.
func dial(t *testing.T, r *Registry, first *agentv1.ConnectRequest) *fakeAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &fakeAgent{st: &chanStream{in: make(chan *agentv1.ConnectRequest, 64), out: make(chan *agentv1.ConnectResponse, 64), ctx: ctx},
		cancel: cancel, done: make(chan struct{})}
	go func() {
		a.err = r.Serve(ctx, a.st)
		close(a.done)
	}()
	a.st.in <- first
	t.Cleanup(func() { a.leave(t) })
	return a
}

// agentReg is a Register of node with a host address and, if not "", a
// pod address, in this coordinator's protocol version.
func agentReg(node, host, pod string) *agentv1.Register {
	reg := &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: host}}}
	if pod != "" {
		reg.Addresses = append(reg.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_POD, Ip: pod})
	}
	return reg
}

// registerMsg wraps reg in the first message of a session.
func registerMsg(reg *agentv1.Register) *agentv1.ConnectRequest {
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}}
}

// connect dials r with reg and waits for the Registered answer.
func connect(t *testing.T, r *Registry, reg *agentv1.Register) (*fakeAgent, *agentv1.Registered) {
	t.Helper()
	a := dial(t, r, registerMsg(reg))
	m := a.next(t, "Registered", func(m *agentv1.ConnectResponse) bool { return m.GetRegistered() != nil })
	return a, m.GetRegistered()
}

// next returns the next message from the coordinator that match accepts,
// skipping the others (heartbeats, Endpoints, ...); it fails the test if
// none comes within waitBound or the session ends first.
func (a *fakeAgent) next(t *testing.T, what string, match func(*agentv1.ConnectResponse) bool) *agentv1.ConnectResponse {
	t.Helper()
	timeout := time.NewTimer(waitBound)
	defer timeout.Stop()
	for {
		select {
		case m := <-a.st.out:
			if match(m) {
				return m
			}
		case <-a.done:
			t.Fatalf("session ended before %s: %v", what, a.err)
		case <-timeout.C:
			t.Fatalf("no %s within %v", what, waitBound)
		}
	}
}

// wait returns Serve's error; it fails the test if Serve runs on for
// waitBound.
func (a *fakeAgent) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-a.done:
		return a.err
	case <-time.After(waitBound):
		t.Fatalf("Serve did not return within %v", waitBound)
		return nil
	}
}

// leave ends the agent's stream (Recv answers io.EOF) and waits for
// Serve to return.
func (a *fakeAgent) leave(t *testing.T) {
	t.Helper()
	a.cancel()
	if err := a.wait(t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrReplaced) && !errors.Is(err, ErrShutdown) {
		t.Logf("session ended: %v", err)
	}
}

// send sends m to the coordinator.
func (a *fakeAgent) send(m *agentv1.ConnectRequest) { a.st.in <- m }
