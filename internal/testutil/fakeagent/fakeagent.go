// Package fakeagent plays agent sessions against a coordinator's
// AgentService over real gRPC, for the tests of the coordinator and of
// its server: Open and Connect register one session, Play keeps one
// alive (heartbeats, the Work it gets, the acknowledgements) until Stop,
// muted at will (Mute), ServerAnswer
// and ClientDone build the answers an agent sends, ResultsByTest reads
// back what the coordinator stored.
//
// Only _test.go files import this package, as internal/testutil's own
// test checks. Every goroutine it starts ends before the test's cleanup
// returns.
package fakeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/tick"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// Open opens a session on client with ctx and sends reg. It returns the
// stream and the coordinator's first message (Registered when it took the
// registration), or the error of Connect, Send or the first Recv (a
// refused registration ends the stream with its status, which the error
// wraps; a Send that meets the stream's end, io.EOF, leaves that status
// to the Recv).
func Open(ctx context.Context, client agentv1.AgentServiceClient, reg *agentv1.Register) (agentv1.AgentService_ConnectClient, *agentv1.ConnectResponse, error) {
	s, err := client.Connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", reg.GetNodeName(), err)
	}
	err = s.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}})
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("send register %s: %w", reg.GetNodeName(), err)
	}
	m, err := s.Recv()
	if err != nil {
		return s, nil, fmt.Errorf("register %s: %w", reg.GetNodeName(), err)
	}
	return s, m, nil
}

// Connect opens a session that lives until ctx or the test ends and
// registers reg on it. It fails t (Fatalf) unless the coordinator answers
// Registered.
func Connect(t testing.TB, ctx context.Context, client agentv1.AgentServiceClient, reg *agentv1.Register) agentv1.AgentService_ConnectClient {
	t.Helper()
	s, _ := connect(t, ctx, client, reg)
	return s
}

// connect is Connect that returns the coordinator's Registered too.
func connect(t testing.TB, ctx context.Context, client agentv1.AgentServiceClient, reg *agentv1.Register) (agentv1.AgentService_ConnectClient, *agentv1.Registered) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	s, m, err := Open(ctx, client, reg)
	if err != nil || m.GetRegistered() == nil {
		t.Fatalf("register %s: %v, %v", reg.GetNodeName(), m, err)
	}
	return s, m.GetRegistered()
}

// Config is how a played agent behaves.
type Config struct {
	// Heartbeat is the interval between heartbeats; 200 ms if not
	// positive.
	Heartbeat time.Duration
	// Answer answers a Work; it returns nil to send nothing (the work
	// stays in flight). A nil Answer answers nothing.
	Answer func(*agentv1.Work) *agentv1.WorkResult
}

// Agent is a session played by the test: it heartbeats (unless muted),
// keeps every Work it gets and the test IDs the coordinator acknowledges,
// and answers each Work with its Config's Answer. Its methods may be
// called from any goroutine.
type Agent struct {
	stream     agentv1.AgentService_ConnectClient
	registered *agentv1.Registered
	answer     func(*agentv1.Work) *agentv1.WorkResult
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	muted      atomic.Bool   // heartbeats skipped
	done       chan struct{} // closed when the stream ended

	sendMu    sync.Mutex // serializes Send
	mu        sync.Mutex // guards works, acks and endpoints
	works     []*agentv1.Work
	acks      []string
	endpoints *agentv1.Endpoints
}

// Play registers reg on client (as Connect, failing t if refused) and
// plays the session until ctx or the test ends or Stop; the test's
// cleanup stops it and waits for its goroutines.
func Play(t testing.TB, ctx context.Context, client agentv1.AgentServiceClient, reg *agentv1.Register, cfg Config) *Agent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	stream, registered := connect(t, ctx, client, reg)
	a := &Agent{stream: stream, registered: registered, answer: cfg.Answer, cancel: cancel, done: make(chan struct{})}
	every := cfg.Heartbeat
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	t.Cleanup(a.Stop)
	a.wg.Add(2)
	go func() { // owner: Stop (the cleanup above); ends with ctx
		defer a.wg.Done()
		beat, stop := context.WithCancel(ctx) // a failed send ends the beats
		defer stop()
		tick.Every(beat, every, func() {
			if !a.muted.Load() && a.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{SendTime: timestamppb.Now()}}}) != nil {
				stop()
			}
		})
	}()
	go func() { // owner: Stop (the cleanup above); ends with the stream (ctx)
		defer a.wg.Done()
		defer close(a.done)
		for {
			m, err := a.stream.Recv()
			if err != nil {
				return
			}
			if a.record(m) && a.answer != nil {
				if wr := a.answer(m.GetWork()); wr != nil {
					if a.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: wr}}) != nil {
						return
					}
				}
			}
		}
	}()
	return a
}

// Stop ends the session (as an agent that went away) and waits for its
// goroutines; it may be called more than once.
func (a *Agent) Stop() {
	a.cancel()
	a.wg.Wait()
}

// Done is closed once the session's stream ended: Stop, or the
// coordinator ended it (a newer session of the node took over, say).
func (a *Agent) Done() <-chan struct{} { return a.done }

// Mute stops (true) or resumes (false) the heartbeats, the session kept
// open: a hung agent.
func (a *Agent) Mute(muted bool) { a.muted.Store(muted) }

// Registered is the coordinator's answer to the registration.
func (a *Agent) Registered() *agentv1.Registered { return a.registered }

// record keeps m's acknowledgements, Endpoints and Work; it reports
// whether m is a Work.
func (a *Agent) record(m *agentv1.ConnectResponse) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acks = append(a.acks, m.GetResultAck().GetWorkIds()...)
	if ep := m.GetEndpoints(); ep != nil {
		a.endpoints = ep
	}
	w := m.GetWork()
	if w != nil {
		a.works = append(a.works, w)
	}
	return w != nil
}

// Send sends m on the session; it returns the stream's error.
func (a *Agent) Send(m *agentv1.ConnectRequest) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	if err := a.stream.Send(m); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// Endpoints returns the last Endpoints the coordinator sent (nil: none
// yet).
func (a *Agent) Endpoints() *agentv1.Endpoints {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.endpoints
}

// Works returns the Work received so far, in order.
func (a *Agent) Works() []*agentv1.Work {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.works)
}

// ClientWork returns the work IDs of the run_client Work received so
// far, in order.
func (a *Agent) ClientWork() []string {
	var out []string
	for _, w := range a.Works() {
		if w.GetRunClient() != nil {
			out = append(out, w.GetWorkId())
		}
	}
	return out
}

// RunClients returns the run_client actions received so far, in order.
func (a *Agent) RunClients() []*agentv1.RunClient {
	var out []*agentv1.RunClient
	for _, w := range a.Works() {
		if rc := w.GetRunClient(); rc != nil {
			out = append(out, rc)
		}
	}
	return out
}

// Acked reports whether the coordinator acknowledged every one of ids.
func (a *Agent) Acked(ids ...string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(a.acks, id) {
			return false
		}
	}
	return true
}

// ServerAnswer answers StartServer (port 5201) and StopServer as an
// agent whose servers start at once, and nothing else (nil).
func ServerAnswer(w *agentv1.Work) *agentv1.WorkResult {
	wr := &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK}
	switch {
	case w.GetStartServer() != nil:
		wr.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{Port: 5201}}
	case w.GetStopServer() != nil:
		wr.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	default:
		return nil
	}
	return wr
}

// ClientDone is the answer (in time or late) to the client Work workID
// with results.
func ClientDone(workID string, results ...*measurev1.Result) *agentv1.ConnectRequest {
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
		WorkId: workID, Status: measurev1.Status_STATUS_OK,
		Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: results}}}}}
}

// ResultsByTest lists the stored results of run runID by their test ID
// (the run-local one). It fails t if ListResults fails.
func ResultsByTest(t testing.TB, ctx context.Context, mesh meshv1.MeshServiceClient, runID string) map[string]*measurev1.Result {
	t.Helper()
	resp, err := mesh.ListResults(ctx, &meshv1.ListResultsRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*measurev1.Result{}
	for _, r := range resp.GetResults() {
		out[r.GetTestId()] = r
	}
	return out
}
