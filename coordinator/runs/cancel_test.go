package runs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// blockingAgents answer pings at once (instantAgents) and run every
// iperf3 client until a cancel_client for it arrives, as an agent does:
// the client then answers STATUS_CANCELED. They count what they were
// asked.
type blockingAgents struct {
	*instantAgents
	running chan string // the work ID of each iperf3 client that started

	mu       sync.Mutex
	clients  map[string]chan struct{} // closed by the cancel
	iperf3   int                      // iperf3 clients dispatched
	started  map[string]bool          // servers up, by work ID
	starts   int
	canceled []string // work IDs that got a cancel_client
	// onStart, if set, is called at each start_server before it answers.
	onStart func()
	// busy is how many start_servers, the first ones, answer
	// STATUS_BUSY.
	busy int
}

func newBlockingAgents(n int) *blockingAgents {
	a := &blockingAgents{instantAgents: newInstantAgents(n), running: make(chan string, 64),
		clients: map[string]chan struct{}{}, started: map[string]bool{}}
	for name, node := range a.addrs {
		node.Iperf3Port = protocol.DefaultIperf3Port
		a.addrs[name] = node
	}
	return a
}

func (a *blockingAgents) Dispatch(ctx context.Context, node string, w *agentv1.Work) (*agentv1.WorkResult, error) {
	res := &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK}
	switch act := w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		a.mu.Lock()
		a.started[w.GetWorkId()] = true
		a.starts++
		onStart, busy := a.onStart, a.busy > 0
		a.busy--
		a.mu.Unlock()
		if onStart != nil {
			onStart()
		}
		if busy { // no server up
			a.mu.Lock()
			delete(a.started, w.GetWorkId())
			a.mu.Unlock()
			return &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_BUSY, Message: "busy"}, nil
		}
		res.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{Port: protocol.DefaultIperf3Port}}
		return res, nil
	case *agentv1.Work_StopServer:
		a.mu.Lock()
		delete(a.started, w.GetWorkId())
		a.mu.Unlock()
		res.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
		return res, nil
	case *agentv1.Work_RunClient:
		if testIsPing(act.RunClient) {
			return a.instantAgents.Dispatch(ctx, node, w)
		}
		stop := make(chan struct{})
		a.mu.Lock()
		a.clients[w.GetWorkId()] = stop
		a.iperf3++
		a.mu.Unlock()
		a.running <- w.GetWorkId()
		select {
		case <-stop:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_CANCELED,
			Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{
				Spec: act.RunClient.GetSpec(), Status: measurev1.Status_STATUS_CANCELED, Message: "the run was canceled",
				StartTime: timestamppb.Now(), Elapsed: durationpb.New(time.Millisecond), TargetAddress: act.RunClient.GetTargetIp(),
			}}}}}, nil
	}
	return nil, errors.New("unexpected work")
}

func testIsPing(rc *agentv1.RunClient) bool {
	return rc.GetSpec().GetTest() == measurev1.Test_TEST_PING
}

func (a *blockingAgents) Send(_ context.Context, _ string, w *agentv1.Work) error {
	if w.GetCancelClient() == nil {
		return errors.New("only cancel_client is sent")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.canceled = append(a.canceled, w.GetWorkId())
	if stop, ok := a.clients[w.GetWorkId()]; ok {
		close(stop)
		delete(a.clients, w.GetWorkId())
	}
	return nil
}

// cancelFixture is a manager over blockingAgents and a real store.
type cancelFixture struct {
	m      *Manager
	st     *store.Store
	agents *blockingAgents
	gate   *schedule.Gate
	ended  chan measurev1.RunState
}

func newCancelFixture(t *testing.T, ctx context.Context, nodes int) *cancelFixture {
	t.Helper()
	st := openStore(t)
	f := &cancelFixture{st: st, agents: newBlockingAgents(nodes), gate: schedule.NewGate(0), ended: make(chan measurev1.RunState, 4)}
	var err error
	f.m, err = New(ctx, Config{Store: st, Agents: f.agents, Gate: f.gate, Observer: endObserver(f.ended),
		IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.m.Close)
	return f
}

// statuses counts the stored results of a run by status and test.
func (f *cancelFixture) statuses(t *testing.T, ctx context.Context, runID string) map[measurev1.Test]map[measurev1.Status]int {
	t.Helper()
	rs, _, err := f.st.ListResults(ctx, store.Filter{RunID: runID}, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[measurev1.Test]map[measurev1.Status]int{}
	for _, r := range rs {
		tt := r.GetSpec().GetTest()
		if got[tt] == nil {
			got[tt] = map[measurev1.Status]int{}
		}
		got[tt][r.GetStatus()]++
	}
	return got
}

var (
	pingTest   = &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	iperf3Test = &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP}
	hostHost   = []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}
)

// Canceling a run: the tests that ended are kept, the client running is
// stopped on its agent and its server stopped, the tests not started get
// STATUS_CANCELED without any work sent for them, and the run ends
// RUN_STATE_CANCELED saying who canceled it.
func TestCancelRun(t *testing.T) {
	ok, canceled := measurev1.Status_STATUS_OK, measurev1.Status_STATUS_CANCELED
	tests := []struct {
		name string
		spec *measurev1.RunSpec
		// holdGate keeps every node busy in the Gate: no heavy test of
		// the run starts (a queued run).
		holdGate bool
		// waitRunning waits for an iperf3 client to run before the cancel.
		waitRunning  bool
		want         map[measurev1.Test]map[measurev1.Status]int
		wantClients  int // iperf3 clients dispatched
		wantCanceled int // cancel_client sent at least
	}{
		{"mid-run: pings kept, the running client stopped, the rest canceled",
			&measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{pingTest, iperf3Test}}, false, true,
			map[measurev1.Test]map[measurev1.Status]int{measurev1.Test_TEST_PING: {ok: 6}, measurev1.Test_TEST_IPERF3_TCP: {canceled: 6}}, 1, 1},
		{"queued: no test started, none dispatched",
			&measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{iperf3Test}}, true, false,
			map[measurev1.Test]map[measurev1.Status]int{measurev1.Test_TEST_IPERF3_TCP: {canceled: 6}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f := newCancelFixture(t, ctx, 3)
			if tt.holdGate {
				for _, pair := range [][2]string{{"node-0000", "node-0001"}, {"node-0002", ""}} {
					release, err := f.gate.Acquire(ctx, true, pair[0], pair[1])
					if err != nil {
						t.Fatal(err)
					}
					defer release()
				}
			}
			run, err := f.m.Trigger(ctx, tt.spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
			if err != nil {
				t.Fatal(err)
			}
			if tt.waitRunning {
				select {
				case <-f.agents.running:
				case <-ctx.Done():
					t.Fatal("no iperf3 client started")
				}
			}
			// In progress, it is what Active lists (the monitor yields to
			// it), a header without its planned tests.
			if act := f.m.Active(); len(act) != 1 || act[0].GetRunId() != run.GetRunId() || len(act[0].GetPlanned()) != 0 ||
				act[0].GetOrigin() != measurev1.RunOrigin_RUN_ORIGIN_CLIENT || testspec.RunEnded(act[0].GetState()) {
				t.Errorf("Active() = %v, want the run's header, in progress", act)
			}
			got, err := f.m.Cancel(ctx, run.GetRunId(), "tester")
			if err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			if got.GetRunId() != run.GetRunId() || len(got.GetPlanned()) != 0 {
				t.Errorf("Cancel returned run %q with %d planned tests, want %q without them", got.GetRunId(), len(got.GetPlanned()), run.GetRunId())
			}
			select {
			case state := <-f.ended:
				if state != measurev1.RunState_RUN_STATE_CANCELED {
					t.Fatalf("run ended %v, want RUN_STATE_CANCELED", state)
				}
			case <-ctx.Done():
				t.Fatal("the canceled run did not end")
			}
			if act := f.m.Active(); len(act) != 0 {
				t.Errorf("Active() = %v after the run ended, want none", act)
			}
			stored, err := f.m.Get(ctx, run.GetRunId())
			if err != nil {
				t.Fatal(err)
			}
			if stored.GetState() != measurev1.RunState_RUN_STATE_CANCELED || stored.GetMessage() != "canceled by tester" || stored.GetEndTime() == nil ||
				stored.GetTestsDone() != stored.GetTestsPlanned() {
				t.Errorf("run %v %q end %v, %d/%d done; want canceled by tester, ended, all counted", stored.GetState(), stored.GetMessage(),
					stored.GetEndTime(), stored.GetTestsDone(), stored.GetTestsPlanned())
			}
			if got := f.statuses(t, ctx, run.GetRunId()); !equalCounts(got, tt.want) {
				t.Errorf("results by test and status %v, want %v", got, tt.want)
			}
			f.agents.mu.Lock()
			defer f.agents.mu.Unlock()
			if f.agents.iperf3 != tt.wantClients || len(f.agents.canceled) < tt.wantCanceled || len(f.agents.started) != 0 {
				t.Errorf("%d iperf3 clients dispatched, %d cancels, servers left up %v; want %d clients, at least %d cancels, no server up",
					f.agents.iperf3, len(f.agents.canceled), f.agents.started, tt.wantClients, tt.wantCanceled)
			}
			if tt.wantClients == 0 && f.agents.starts != 0 {
				t.Errorf("%d servers started for a run canceled before its tests", f.agents.starts)
			}
		})
	}
}

func equalCounts(a, b map[measurev1.Test]map[measurev1.Status]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w := b[k]
		if len(v) != len(w) {
			return false
		}
		for s, n := range v {
			if w[s] != n {
				return false
			}
		}
	}
	return true
}

// Canceling a run that ended returns it unchanged; an unknown run is
// ErrNotFound.
func TestCancelEndedOrUnknownRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := newCancelFixture(t, ctx, 2)
	run, err := f.m.Trigger(ctx, &measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{pingTest}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	if state := <-f.ended; state != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Fatalf("run ended %v", state)
	}
	got, err := f.m.Cancel(ctx, run.GetRunId(), "tester")
	if err != nil || got.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED || strings.Contains(got.GetMessage(), "canceled") {
		t.Errorf("Cancel of an ended run = %v %q, %v; want it unchanged (succeeded)", got.GetState(), got.GetMessage(), err)
	}
	stored, err := f.m.Get(ctx, run.GetRunId())
	if err != nil || stored.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Errorf("stored run after the cancel: %v, %v", stored.GetState(), err)
	}
	if _, err := f.m.Cancel(ctx, "no-such-run", "tester"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel of an unknown run: %v, want ErrNotFound", err)
	}
	if slices.Contains(f.agents.canceled, "") {
		t.Error("a cancel_client without test_id was sent")
	}
}
