package runs

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// gatedStore is a real store that records the run states it is asked to
// write, in order, and, when holdFinal is set, holds every write of a
// run's final header (PutRun of an ended state) until release is closed,
// telling held when the first one waits.
type gatedStore struct {
	*store.Store
	holdFinal bool
	held      chan struct{} // 1-buffered
	release   chan struct{}

	mu     sync.Mutex
	states []measurev1.RunState
}

func newGatedStore(t *testing.T, holdFinal bool) *gatedStore {
	t.Helper()
	st := openStore(t)
	return &gatedStore{Store: st, holdFinal: holdFinal, held: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *gatedStore) note(run *measurev1.Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, run.GetState())
}

// written returns the states written, each run of equal states once.
func (s *gatedStore) written() []measurev1.RunState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Compact(slices.Clone(s.states))
}

func (s *gatedStore) CreateRun(ctx context.Context, run *measurev1.Run) error {
	s.note(run)
	return s.Store.CreateRun(ctx, run)
}

func (s *gatedStore) PutRun(ctx context.Context, run *measurev1.Run) error {
	s.note(run)
	if s.holdFinal && testspec.RunEnded(run.GetState()) {
		select {
		case s.held <- struct{}{}:
		default:
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.PutRun(ctx, run)
}

func (s *gatedStore) RecordResults(ctx context.Context, run *measurev1.Run, results []*measurev1.Result) error {
	s.note(run)
	return s.Store.RecordResults(ctx, run, results)
}

func newGatedManager(t *testing.T, ctx context.Context, st *gatedStore, agents Agents, gate *schedule.Gate) *Manager {
	t.Helper()
	m, err := New(ctx, Config{Store: st, Agents: agents, Gate: gate, IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// A run is RUN_STATE_QUEUED while its first test waits for its nodes
// (another run holds them in the Gate), RUN_STATE_RUNNING once that test
// has them, then ends: its watcher, Get and the store all see the three
// states in that order.
func TestRunIsQueuedThenRunning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := newGatedStore(t, false)
	agents := newInstantAgents(2)
	gate := schedule.NewGate(1)
	// Every light slot of both nodes is taken: no test of the run starts.
	hold, err := gate.Acquire(ctx, false, agents.nodes[0], agents.nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	m := newGatedManager(t, ctx, st, agents, gate)
	run, err := m.Trigger(ctx, &measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{pingTest}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	if run.GetState() != measurev1.RunState_RUN_STATE_QUEUED {
		t.Errorf("Trigger returned state %v, want QUEUED", run.GetState())
	}
	ch, err := m.Watch(ctx, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(ctx, run.GetRunId())
	if err != nil || got.GetState() != measurev1.RunState_RUN_STATE_QUEUED {
		t.Errorf("Get while the nodes are held: %v, %v; want QUEUED", got.GetState(), err)
	}
	stored, err := st.GetRun(ctx, run.GetRunId())
	if err != nil || stored.GetState() != measurev1.RunState_RUN_STATE_QUEUED {
		t.Errorf("stored while the nodes are held: %v, %v; want QUEUED", stored.GetState(), err)
	}
	hold()

	var states []measurev1.RunState
	for u := range ch {
		if len(states) == 0 || states[len(states)-1] != u.Run.GetState() {
			states = append(states, u.Run.GetState())
			if u.Run.GetState() == measurev1.RunState_RUN_STATE_RUNNING && len(u.Results) != 0 {
				t.Errorf("the update that says the run started carries %d results, want none", len(u.Results))
			}
		}
	}
	want := []measurev1.RunState{measurev1.RunState_RUN_STATE_QUEUED, measurev1.RunState_RUN_STATE_RUNNING, measurev1.RunState_RUN_STATE_SUCCEEDED}
	if !slices.Equal(states, want) {
		t.Errorf("watched states %v, want %v", states, want)
	}
	if w := st.written(); !slices.Equal(w, want) {
		t.Errorf("stored states %v, want %v", w, want)
	}
	got, err = m.Get(ctx, run.GetRunId())
	if err != nil || got.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED || got.GetTestsDone() != 2 {
		t.Errorf("Get after the end: %v (%d done), %v; want SUCCEEDED, 2 done", got.GetState(), got.GetTestsDone(), err)
	}
}

// While the store writes a run's end, Get, Watch and Cancel of that run
// and a new Trigger answer: the manager holds no lock across a store
// write. The Cancel, come after the end was decided, changes nothing.
func TestStoreWriteBlocksNoCaller(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := newGatedStore(t, true)
	m := newGatedManager(t, ctx, st, newInstantAgents(2), schedule.NewGate(0))
	spec := &measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{pingTest}}
	run, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.held:
	case <-ctx.Done():
		t.Fatal("the run's end was never written")
	}
	// The end is being written (and stays so until release).
	blockCtx, cancelBlock := context.WithTimeout(ctx, 10*time.Second)
	defer cancelBlock()
	type answer struct {
		run *measurev1.Run
		ch  <-chan Update
		err error
	}
	got := testutil.Returns(t, blockCtx, "Get while the run's final write is held", func() answer { r, err := m.Get(ctx, run.GetRunId()); return answer{run: r, err: err} })
	if got.err != nil || testspec.RunEnded(got.run.GetState()) || got.run.GetTestsDone() != 2 {
		t.Errorf("Get during the end's write: %v (%d done), %v; want in progress, 2 done", got.run.GetState(), got.run.GetTestsDone(), got.err)
	}
	first := testutil.Returns(t, blockCtx, "Watch while the run's final write is held", func() answer {
		ch, err := m.Watch(ctx, run.GetRunId())
		if err != nil {
			return answer{err: err}
		}
		return answer{run: (<-ch).Run, ch: ch}
	})
	if first.err != nil || testspec.RunEnded(first.run.GetState()) {
		t.Errorf("Watch during the end's write: %v, %v; want in progress", first.run.GetState(), first.err)
	}
	canceled := testutil.Returns(t, blockCtx, "Cancel while the run's final write is held", func() answer { r, err := m.Cancel(ctx, run.GetRunId(), "tester"); return answer{run: r, err: err} })
	if canceled.err != nil {
		t.Errorf("Cancel during the end's write: %v", canceled.err)
	}
	other := testutil.Returns(t, blockCtx, "Trigger while the run's final write is held", func() answer {
		r, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
		return answer{run: r, err: err}
	})
	if other.err != nil {
		t.Fatalf("Trigger during another run's end: %v", other.err)
	}
	close(st.release)
	if first.ch != nil {
		var last Update
		for u := range first.ch {
			last = u
		}
		if last.Run.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
			t.Errorf("watched run ended %v, want SUCCEEDED", last.Run.GetState())
		}
	}
	final, err := m.Get(ctx, run.GetRunId())
	if err != nil || final.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Errorf("run after the end's write: %v, %v; want SUCCEEDED (the late Cancel changes nothing)", final.GetState(), err)
	}
}

// Close returns once the runs' goroutines ended: the run in progress is
// stored interrupted, its server stopped, and no goroutine of it is left.
// A run triggered after Close ends interrupted before Trigger returns.
func TestCloseWaitsForRuns(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := newCancelFixture(t, ctx, 2)
	spec := &measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{iperf3Test}}
	run, err := f.m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.agents.running:
	case <-ctx.Done():
		t.Fatal("no iperf3 client started")
	}
	f.m.Close()
	stored, err := f.st.GetRun(ctx, run.GetRunId())
	if err != nil || stored.GetState() != measurev1.RunState_RUN_STATE_INTERRUPTED {
		t.Errorf("run stored %v, %v when Close returned; want INTERRUPTED", stored.GetState(), err)
	}
	f.agents.mu.Lock()
	up := len(f.agents.started)
	f.agents.mu.Unlock()
	if up != 0 {
		t.Errorf("%d servers left up when Close returned", up)
	}
	goleak.VerifyNone(t, ignore)

	late, err := f.m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	stored, err = f.st.GetRun(ctx, late.GetRunId())
	if err != nil || stored.GetState() != measurev1.RunState_RUN_STATE_INTERRUPTED || f.m.isActive(late.GetRunId()) {
		t.Errorf("run triggered after Close: stored %v, %v, active %t when Trigger returned; want INTERRUPTED, ended",
			stored.GetState(), err, f.m.isActive(late.GetRunId()))
	}
	f.m.Close() // again: nothing left
	goleak.VerifyNone(t, ignore)
}

// A test that gets its nodes in the Gate while Close is under way sends
// no work: Close closes stopc a moment before the run's context ends, and
// the Gate, woken by a release and by the end at once, may pick the free
// place. Each case holds the nodes in the Gate, begins Close (stopc), then
// gives them back; repeated, since the order of the Gate's wake-ups is
// the scheduler's. The run ends interrupted, every test a
// STATUS_INTERRUPTED placeholder, with no server started, no client sent
// and no record of one in flight.
func TestCloseSendsNoNewWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		test  *measurev1.TestSpec
		heavy bool
	}{
		{"heavy slot", iperf3Test, true},
		{"light test", pingTest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 {
				f := newCancelFixture(t, ctx, 2)
				holds := 1
				if !tc.heavy {
					holds = f.gate.MaxLight()
				}
				var releases []func()
				for range holds {
					release, ok := f.gate.TryAcquire(tc.heavy, "node-0000", "node-0001")
					if !ok {
						t.Fatal("the Gate refused the test's hold")
					}
					releases = append(releases, release)
				}
				run, err := f.m.Trigger(ctx, &measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{tc.test},
					Pairs: []*measurev1.NodePair{{SrcNode: "node-0000", DstNode: "node-0001"}}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.heavy {
					// Past its jitter, the light test waits in the Gate
					// (were it still in its jitter, the end would win).
					time.Sleep(2 * lightJitter)
				}
				f.beginClose()
				for _, release := range releases {
					release()
				}
				f.m.Close()

				f.agents.mu.Lock()
				sent := f.agents.starts + f.agents.iperf3 + f.agents.peak
				f.agents.mu.Unlock()
				rs, inFlight := f.onlyTest(t, ctx, run)
				if sent != 0 || inFlight || len(rs) != 1 || rs[0].GetStatus() != measurev1.Status_STATUS_INTERRUPTED {
					t.Fatalf("work sent after Close began: %d, record in flight %t; results %v, want one STATUS_INTERRUPTED", sent, inFlight, rs)
				}
			}
		})
	}
}

// Close cuts no client and sends none: a client running when Close begins
// gets no cancel_client (its agent keeps the answer for the next
// coordinator, whose late handler stores it), and a test whose server
// start is answered as Close begins sends no client and stops its
// server. Each test ends a STATUS_INTERRUPTED result.
func TestCloseCutsNoClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := &measurev1.RunSpec{Repeats: 1, Paths: hostHost, Tests: []*measurev1.TestSpec{iperf3Test},
		Pairs: []*measurev1.NodePair{{SrcNode: "node-0000", DstNode: "node-0001"}}}
	tests := []struct {
		name string
		// clients is how many clients the agents got; record whether the
		// test's work is recorded in flight.
		clients int
		record  bool
	}{
		{"client running", 1, true},
		{"server started as Close begins", 0, false},
		{"server busy, Close in the backoff", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCancelFixture(t, ctx, 2)
			var startsClosing atomic.Int32 // start_servers sent while Close was under way
			switch tt.name {
			case "server started as Close begins":
				f.agents.onStart = f.beginClose // before the start is answered
			case "server busy, Close in the backoff":
				f.agents.busy = 1
				f.agents.onStart = func() {
					if f.m.closing() {
						startsClosing.Add(1)
					}
				}
			}
			run, err := f.m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.clients > 0:
				select {
				case <-f.agents.running:
				case <-ctx.Done():
					t.Fatal("no iperf3 client started")
				}
			case tt.name == "server busy, Close in the backoff":
				if !testutil.Within(30*time.Second, time.Millisecond, func() bool { f.agents.mu.Lock(); defer f.agents.mu.Unlock(); return f.agents.starts > 0 }) {
					t.Fatal("no server start")
				}
				f.beginClose() // within the retry's backoff (busyBackoff) at most times
			case !testutil.Within(30*time.Second, time.Millisecond, f.m.closing):
				t.Fatal("no server start")
			}
			f.m.Close()
			f.agents.mu.Lock()
			clients, canceled, up := f.agents.iperf3, slices.Clone(f.agents.canceled), len(f.agents.started)
			f.agents.mu.Unlock()
			rs, record := f.onlyTest(t, ctx, run)
			if n := startsClosing.Load(); n > 0 {
				t.Errorf("%d start_server sent while Close was under way", n)
			}
			if clients != tt.clients || len(canceled) > 0 || up > 0 || record != tt.record || len(rs) != 1 || rs[0].GetStatus() != measurev1.Status_STATUS_INTERRUPTED {
				t.Errorf("clients %d (want %d), cancel_client to %v, %d servers up, recorded in flight %t (want %t); results %v, want one STATUS_INTERRUPTED",
					clients, tt.clients, canceled, up, record, tt.record, rs)
			}
		})
	}
}

// beginClose is Close's first step, alone: stopc closed, the runs'
// contexts not yet ended.
func (f *cancelFixture) beginClose() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.closed = true
	close(f.m.stopc)
}

// onlyTest returns the stored results of run's one planned test and
// whether its client work is recorded in flight.
func (f *cancelFixture) onlyTest(t *testing.T, ctx context.Context, run *measurev1.Run) (rs []*measurev1.Result, inFlight bool) {
	t.Helper()
	rs, _, err := f.st.ListResults(ctx, store.Filter{RunID: run.GetRunId()}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, inFlight, err = f.st.Dispatched(ctx, workID(run.GetRunId(), run.GetPlanned()[0]))
	if err != nil {
		t.Fatal(err)
	}
	return rs, inFlight
}
