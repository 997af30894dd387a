// Package runs owns the life of a run: it plans it (coordinator/schedule),
// executes every planned test through the agents (start the server on the
// destination, run the client on the source, stop the server), stores every
// result, keeps the run's progress and streams it to watchers.
package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrNotFound means the run does not exist.
var ErrNotFound = errors.New("run not found")

// ErrTooBusy wraps the refusal of a run or a watch beyond
// Config.MaxActiveRuns or Config.MaxWatchers; the message gives the count
// and the limit.
var ErrTooBusy = errors.New("too busy")

// Agents is what a run needs of the registry.
type Agents interface {
	// Known lists the nodes of a default mesh and the nodes a run may name.
	Known() (mesh, targetable []string)
	// Node returns a connected node.
	Node(name string) (registry.Node, bool)
	// GossipGone reports whether a quorum of the agents' gossip declares a
	// node dead or left while its session is not live, and which agents
	// do; such a node gets no work.
	GossipGone(node string) (deadBy []string, gone bool)
	// Dispatch sends work to a node's agent and waits for the answer.
	Dispatch(ctx context.Context, node string, w *agentv1.Work) (*agentv1.WorkResult, error)
	// Send queues work that gets no answer (cancel_client) for a node's
	// agent, after the work dispatched to it before.
	Send(ctx context.Context, node string, w *agentv1.Work) error
	// Ack tells a node's agent, without blocking, that the answers to its
	// client work testIDs are stored (or never will be); acks queued
	// before a Dispatch to that node reach the agent before its work.
	Ack(node string, testIDs ...string)
	// HandleLate installs the handler of client answers no Dispatch waits
	// for (see registry.LateHandler).
	HandleLate(h registry.LateHandler)
}

// Store is what a run needs of coordinator/store. GetRun's error must wrap
// an error for which IsNotFound reports true when the run is absent.
type Store interface {
	// CreateRun writes a new run with its planned tests.
	CreateRun(ctx context.Context, run *measurev1.Run) error
	// PutRun updates a run's header; Planned is ignored.
	PutRun(ctx context.Context, run *measurev1.Run) error
	// GetRun reads a run with its planned tests.
	GetRun(ctx context.Context, runID string) (*measurev1.Run, error)
	// Runs lists run headers by state.
	Runs(ctx context.Context, states ...measurev1.RunState) ([]*measurev1.Run, error)
	// AddResults writes results; a sample (run, test, index) that is
	// stored already is kept unless it is a STATUS_INTERRUPTED placeholder.
	AddResults(ctx context.Context, results []*measurev1.Result) error
	// ReplaceInterrupted writes each test's results (one test per element)
	// only where that test's stored results are all STATUS_INTERRUPTED
	// placeholders, fixing its run's tests_failed, and reports which tests
	// it wrote.
	ReplaceInterrupted(ctx context.Context, tests [][]*measurev1.Result) ([]bool, error)
	// RecordResults writes results as AddResults does and the run's header
	// as PutRun does, in one transaction committed before it returns.
	RecordResults(ctx context.Context, run *measurev1.Run, results []*measurev1.Result) error
	// RunTests maps each of a run's tests that has results to whether one
	// of them failed.
	RunTests(ctx context.Context, runID string) (map[string]bool, error)
	// PutDispatched records durably that the client work workID
	// (RUN_ID/TEST_ID) goes to node; RecordResults deletes the record of
	// a test it stores a result for that is no STATUS_INTERRUPTED
	// placeholder.
	PutDispatched(ctx context.Context, workID, node string, at time.Time) error
	// Dispatched returns the node workID's client work went to, if its
	// record is kept.
	Dispatched(ctx context.Context, workID string) (node string, at time.Time, ok bool, err error)
	// DeleteDispatched forgets the records of workIDs.
	DeleteDispatched(ctx context.Context, workIDs ...string) error
	// DeleteRunDispatched forgets the records of a run's tests.
	DeleteRunDispatched(ctx context.Context, runID string) (int, error)
	// PruneDispatched forgets the records of work dispatched before cutoff.
	PruneDispatched(ctx context.Context, cutoff time.Time) (int, error)
}

// DispatchedMaxAge is how long the record of client work in flight is
// kept when no answer comes: its late answer is refused after that.
const DispatchedMaxAge = 7 * 24 * time.Hour

// Config configures New.
type Config struct {
	// Store persists runs and results; required.
	Store Store
	// IsNotFound tells Store.GetRun's "absent" error; required.
	IsNotFound func(error) bool
	// Agents dispatches work; required.
	Agents Agents
	// Gate keeps tests apart; nil means a new Gate with default limits.
	Gate *schedule.Gate
	// WatchBuffer is how many updates a watcher may fall behind before it
	// is dropped; zero means DefaultWatchBuffer.
	WatchBuffer int
	// MaxActiveRuns bounds the runs in progress (and being planned) at
	// once: a Trigger beyond it fails with ErrTooBusy. Zero means
	// DefaultMaxActiveRuns.
	MaxActiveRuns int
	// MaxWatchers bounds the Watch calls following runs in progress at
	// once, over all runs: one beyond it fails with ErrTooBusy. Zero means
	// DefaultMaxWatchers.
	MaxWatchers int
	// Logger receives run events; nil means discard.
	Logger *slog.Logger
	// Observer, if set, is told of every run's start and end and of every
	// batch of results recorded (coordinator/metrics); nil means none.
	Observer Observer
	// ExternalTargets is the allowlist of external targets runs may name
	// (the coordinator's config file; the registry sends the same list to
	// the agents); nil means none.
	ExternalTargets []*agentv1.ExternalTarget
	// Invalid counts the results whose figures failed the checks
	// (coordinator/sanity); nil means they are not counted (they are
	// still stored as STATUS_INVALID).
	Invalid *sanity.Counter
}

// Observer watches what the manager records. Its methods are called from
// the runs' goroutines, concurrently; they must return quickly and must
// neither modify nor keep the results.
type Observer interface {
	// RunStarted is called once a run is stored, before its first test.
	RunStarted(runID string)
	// Recorded is called with one test's results once the store was asked
	// to write them (a store error is logged, not passed on).
	Recorded(results []*measurev1.Result)
	// RunEnded is called once per started run, with its final state.
	RunEnded(runID string, state measurev1.RunState)
}

// Update is one step of a run: its state after a test ended, and that
// test's results; or its state alone, in the first update of a watch and
// in the one that says the run left RUN_STATE_QUEUED for
// RUN_STATE_RUNNING (its first test started).
type Update struct {
	// Run is a snapshot without its planned tests and spec.
	Run *measurev1.Run
	// Results are the results of the test that just ended.
	Results []*measurev1.Result
	// Lagged is set on the last update sent to a watcher that fell too far
	// behind; its channel is closed after it.
	Lagged bool
}

// Manager runs runs. Each run has a goroutine of its own (and those of
// its tests and its recorder, which it waits for), started by Trigger; a
// run ends by itself, by Cancel, or by Close, which ends every run and
// returns once their goroutines have.
type Manager struct {
	cfg Config
	log *slog.Logger

	// stopc is closed by Close: every run in progress ends interrupted,
	// and the waits that only Close cuts (untilClose) are given up.
	stopc chan struct{}
	// wg counts the runs' goroutines, which Close waits for; a goroutine
	// is added under mu, and only while closed is false.
	wg sync.WaitGroup

	mu       sync.Mutex
	closed   bool // Close was called
	active   map[string]*active
	planning int // Triggers past the MaxActiveRuns check, not yet active
	// watchers counts the watchers of runs in progress (MaxWatchers).
	watchers atomic.Int64

	warn sanity.Limiter // invalid figures, per source node
	// extBackoff is the first wait before retrying an external server
	// that answered busy: externalBusyBackoff, shorter in tests.
	extBackoff time.Duration
}

// active is a run in progress.
type active struct {
	// cancel ends the context of the run's scheduling (Cancel, and the
	// run's end); the tests in flight then stop on their agents.
	cancel context.CancelFunc

	mu sync.Mutex
	// run is the run's state, replaced (never changed in place) by
	// finish's final state; while the run goes on, its counters and done
	// change only in its recorder's goroutine, its state in started.
	run      *measurev1.Run
	done     map[string]bool // test IDs that ended
	watchers map[*watcher]bool
	// canceledBy, once set, is who canceled the run (Cancel).
	canceledBy string
	// ending is set once finish decided how the run ends, before it
	// stores that: a Cancel from then on changes nothing.
	ending bool
}

// watcher is one Watch call's channel. Its room is bounded; a watcher
// that falls behind gets a Lagged update and is dropped.
type watcher struct {
	ch    chan Update
	stop  func() bool   // unregisters the context.AfterFunc
	count *atomic.Int64 // Manager.watchers, given back by drop
}

// DefaultWatchBuffer bounds the updates a slow watcher may fall behind by.
const DefaultWatchBuffer = 4096

// send queues u, or ends a watcher that has no room left with a Lagged
// update; it reports whether the watcher is still there. Caller holds a.mu.
func (a *active) send(w *watcher, u Update) bool {
	if len(w.ch) >= cap(w.ch)-1 {
		w.ch <- Update{Run: u.Run, Lagged: true}
		a.drop(w)
		return false
	}
	w.ch <- u
	return true
}

// drop closes and forgets w. Caller holds a.mu.
func (a *active) drop(w *watcher) {
	if a.watchers[w] {
		delete(a.watchers, w)
		w.stop()
		close(w.ch)
		w.count.Add(-1)
	}
}

// New returns a Manager. Runs that a previous coordinator left queued or
// running are marked interrupted: each of their planned tests without
// results gets a STATUS_INTERRUPTED placeholder, which the test's real
// results replace if its agent sends them late (see late). Then New
// installs the manager as cfg.Agents' late handler.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Agents == nil || cfg.IsNotFound == nil {
		return nil, errors.New("runs: Config.Store, IsNotFound and Agents are required")
	}
	if cfg.Gate == nil {
		cfg.Gate = schedule.NewGate(0)
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = DefaultWatchBuffer
	}
	if cfg.MaxActiveRuns <= 0 {
		cfg.MaxActiveRuns = DefaultMaxActiveRuns
	}
	if cfg.MaxWatchers <= 0 {
		cfg.MaxWatchers = DefaultMaxWatchers
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stale, err := cfg.Store.Runs(ctx, measurev1.RunState_RUN_STATE_QUEUED, measurev1.RunState_RUN_STATE_RUNNING)
	if err != nil {
		return nil, fmt.Errorf("runs: load unfinished runs: %w", err)
	}
	m := &Manager{cfg: cfg, log: log, stopc: make(chan struct{}), active: map[string]*active{}, extBackoff: externalBusyBackoff}
	for _, hdr := range stale {
		run, err := cfg.Store.GetRun(ctx, hdr.GetRunId())
		if err == nil {
			var tests map[string]bool
			if tests, err = cfg.Store.RunTests(ctx, run.GetRunId()); err == nil {
				// The header may lag the results (a crash between the two
				// writes): count again from what is stored.
				run.TestsDone, run.TestsFailed = 0, 0
				for _, failed := range tests {
					run.TestsDone++
					if failed {
						run.TestsFailed++
					}
				}
				err = m.interrupt(ctx, run, tests, "the coordinator stopped before the run ended")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("runs: mark run %s interrupted: %w", hdr.GetRunId(), err)
		}
		log.Warn("run interrupted by a coordinator restart", "run_id", run.GetRunId(), "done", run.GetTestsDone(), "planned", len(run.GetPlanned()))
	}
	if n, err := cfg.Store.PruneDispatched(ctx, time.Now().Add(-DispatchedMaxAge)); err != nil {
		log.Warn("prune the records of client work in flight", "err", err)
	} else if n > 0 {
		log.Info("records of client work in flight that never got an answer pruned", "records", n, "older_than", DispatchedMaxAge)
	}
	cfg.Agents.HandleLate(m.late)
	return m, nil
}

// interrupt ends run as interrupted: every planned test without a result
// (not a key of done) gets a STATUS_INTERRUPTED result saying why, so
// nothing planned is silently missing, and the header is updated.
func (m *Manager) interrupt(ctx context.Context, run *measurev1.Run, done map[string]bool, why string) error {
	if err := m.endRest(ctx, run, done, measurev1.Status_STATUS_INTERRUPTED, why); err != nil {
		return err
	}
	run.State, run.Message, run.EndTime = measurev1.RunState_RUN_STATE_INTERRUPTED, why, timestamppb.Now()
	return m.cfg.Store.PutRun(ctx, run)
}

// endRest gives every planned test of run without a result (not a key of
// done) one result of status saying why, in writes of up to 1000 tests,
// and counts them done and failed in run's header (which it does not
// write).
func (m *Manager) endRest(ctx context.Context, run *measurev1.Run, done map[string]bool, status measurev1.Status, why string) error {
	now := timestamppb.Now()
	var batch []*measurev1.Result
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := m.cfg.Store.AddResults(ctx, batch)
		batch = batch[:0]
		return err
	}
	for _, pt := range run.GetPlanned() {
		if _, ok := done[pt.GetTestId()]; ok {
			continue
		}
		batch = append(batch, &measurev1.Result{
			TestId: pt.GetTestId(), RunId: run.GetRunId(), SrcNode: pt.GetSrcNode(), DstNode: pt.GetDstNode(),
			Path: pt.GetPath(), Spec: pt.GetSpec(), Status: status,
			Message: why, StartTime: now, Elapsed: durationpb.New(0),
		})
		run.TestsDone++
		run.TestsFailed++
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// Close cancels every run in progress, waits until its tests have stopped
// (servers included) and it is marked interrupted, and returns once every
// goroutine of the manager's runs ended. A run triggered after Close ends
// interrupted before Trigger returns. Close may be called more than once.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stopc)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// closing reports whether Close was called.
func (m *Manager) closing() bool {
	select {
	case <-m.stopc:
		return true
	default:
		return false
	}
}

// untilClose returns a context with ctx's values that ends when Close is
// called, or when cancel is, but not with ctx: for the work of a run that
// its cancel must not cut (a server's start, a client's answer) and Close
// must. Its goroutine ends before cancel returns; the caller must call
// cancel.
func (m *Manager) untilClose(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { // owner: the caller, through the cancel returned
		defer close(done)
		select {
		case <-m.stopc:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-done
	}
}

// Trigger plans spec over every known node, stores the run and starts it;
// it returns the run as stored, RUN_STATE_QUEUED (it becomes
// RUN_STATE_RUNNING once its first test has its nodes, see execute).
// A node whose agent is not connected, or that gossip declares dead, stays
// in the plan: its tests end at once with STATUS_AGENT_UNAVAILABLE, so a
// lost agent shows as a failure rather than vanishing from the mesh. Errors wrap schedule.ErrInvalid or
// schedule.ErrNoPairs.
func (m *Manager) Trigger(ctx context.Context, spec *measurev1.RunSpec) (*measurev1.Run, error) {
	release, err := m.reserveRun()
	if err != nil {
		return nil, err
	}
	defer release()
	mesh, targetable := m.cfg.Agents.Known()
	planned, err := schedule.Plan(spec, schedule.Nodes{Mesh: mesh, Targetable: targetable, External: m.cfg.ExternalTargets,
		Families: func(node string) []measurev1.IPFamily {
			if n, ok := m.cfg.Agents.Node(node); ok {
				return n.Families()
			}
			return nil // not connected: IPv4, and its tests fail as unavailable
		}})
	if err != nil {
		return nil, err
	}
	arr := schedule.Arrange(planned)
	run := &measurev1.Run{
		RunId: ulid.Make().String(), Spec: spec, State: measurev1.RunState_RUN_STATE_QUEUED,
		CreateTime: timestamppb.Now(), Planned: planned, TestsPlanned: uint32(len(planned)), Rounds: uint32(len(arr.Rounds)),
	}
	if err := m.cfg.Store.CreateRun(ctx, run); err != nil {
		return nil, fmt.Errorf("store run: %w", err)
	}
	// The run's context: Cancel ends it, and so does Close; the caller's
	// end does not.
	runCtx, cancelRun := m.untilClose(ctx)
	a := &active{run: run, done: make(map[string]bool, len(planned)), cancel: cancelRun}
	m.mu.Lock()
	m.active[run.GetRunId()] = a
	closed := m.closed
	if !closed {
		m.wg.Add(1) // under mu: never after Close's Wait began
	}
	m.mu.Unlock()
	m.log.Info("run started", "run_id", run.GetRunId(), "tests", len(planned), "nodes", len(mesh))
	if m.cfg.Observer != nil {
		m.cfg.Observer.RunStarted(run.GetRunId())
	}
	started := proto.CloneOf(run) // before the run's goroutine changes it
	if closed {
		// No goroutine Close would not wait for: the run, its context
		// ended already, ends interrupted here.
		defer cancelRun()
		m.execute(runCtx, a, arr)
		return started, nil
	}
	go func() { // owner: the manager; stopped by Cancel or Close (stopc), waited for by Close
		defer m.wg.Done()
		defer cancelRun()
		m.execute(runCtx, a, arr)
	}()
	return started, nil
}

// Get returns a run, in progress or stored. The error wraps ErrNotFound.
func (m *Manager) Get(ctx context.Context, runID string) (*measurev1.Run, error) {
	m.mu.Lock()
	a := m.active[runID]
	m.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		return proto.CloneOf(a.run), nil
	}
	run, err := m.cfg.Store.GetRun(ctx, runID)
	if m.cfg.IsNotFound(err) {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	return run, err
}

// execute runs a's tests as schedule.Arrange lays them out, until ctx
// ends (Cancel, or Close): first the
// light tests (at most the Gate's limit per node, each after a small random
// delay), so that latency probes see an idle network rather than one a
// bandwidth test saturates; then the heavy tests round by round, every slot
// of a round at once (up to the spec's max_concurrent_heavy), a round ending
// with its last slot; then the heavy tests to external targets' servers,
// one at a time per target (runExternalQueues). Results are stored in
// group commits (recorder). The run is RUN_STATE_QUEUED until its first
// test got its nodes in the Gate (recorder.started), RUN_STATE_RUNNING
// from then on.
func (m *Manager) execute(ctx context.Context, a *active, arr schedule.Arrangement) {
	runID := a.run.GetRunId()
	rec := m.startRecorder(ctx, a)
	m.runLight(ctx, a, rec, arr.Light)
	var limit chan struct{}
	if c := a.run.GetSpec().GetMaxConcurrentHeavy(); c > 0 {
		limit = make(chan struct{}, c)
	}
	for r, round := range arr.Rounds {
		if ctx.Err() != nil {
			break
		}
		m.log.Debug("round", "run_id", runID, "round", r+1, "of", len(arr.Rounds), "slots", len(round))
		var slots sync.WaitGroup
		for _, slot := range round {
			slots.Add(1)
			go func() {
				defer slots.Done()
				m.runSlot(ctx, a, rec, slot, limit)
			}()
		}
		slots.Wait()
	}
	m.runExternalQueues(ctx, a, rec, arr.External, limit)
	rec.stop()
	m.finish(ctx, a, m.closing())
}

// runSlot runs one pair's heavy tests in turn, holding the pair in the
// Gate (which only waits if another run uses one of its nodes).
func (m *Manager) runSlot(ctx context.Context, a *active, rec *recorder, slot schedule.Slot, limit chan struct{}) {
	if limit != nil {
		select {
		case limit <- struct{}{}:
			defer func() { <-limit }()
		case <-ctx.Done():
			return
		}
	}
	release, err := m.cfg.Gate.Acquire(ctx, true, slot.Pair.Src, slot.Pair.Dst)
	if err != nil {
		return
	}
	defer release()
	rec.started()
	for _, pt := range slot.Tests {
		if ctx.Err() != nil {
			return
		}
		results, answered := m.execTest(ctx, a.run.GetRunId(), pt)
		m.store(a, rec, pt, results, answered)
	}
}

// store records a test's results and, once they are stored, acknowledges
// the client's answer to its source agent.
func (m *Manager) store(a *active, rec *recorder, pt *measurev1.PlannedTest, results []*measurev1.Result, answered bool) {
	if rec.record(results) && answered {
		m.cfg.Agents.Ack(pt.GetSrcNode(), workID(a.run.GetRunId(), pt))
	}
}

// runLight runs the light tests, as many at once as the Gate lets through,
// taken in the Arrangement's order (waves over every node). Each waits
// its jitter, then for its nodes in the Gate, runs, and gives its nodes
// back as soon as its agent answered, before its results are stored. At
// most the Gate's light limit times the run's nodes are under way at once
// (waiting, running or being stored), so a big run's waiting tests stay
// bounded.
func (m *Manager) runLight(ctx context.Context, a *active, rec *recorder, tests []*measurev1.PlannedTest) {
	var wg sync.WaitGroup
	defer wg.Wait()
	nodes := map[string]bool{}
	for _, pt := range tests {
		for _, n := range testspec.DestOf(pt).Nodes(pt.GetSrcNode()) {
			nodes[n] = true
		}
	}
	window := make(chan struct{}, max(len(nodes)*m.cfg.Gate.MaxLight(), 1))
	runID := a.run.GetRunId()
	for _, pt := range tests {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		dst := testspec.DestOf(pt).Node() // "" for a target: no node to hold
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-window }()
			jitter := time.NewTimer(rand.N(lightJitter))
			select {
			case <-jitter.C:
			case <-ctx.Done():
				jitter.Stop()
				return
			}
			release, err := m.cfg.Gate.Acquire(ctx, false, pt.GetSrcNode(), dst)
			if err != nil {
				return
			}
			rec.started()
			results, answered := m.execTest(ctx, runID, pt)
			release()
			m.store(a, rec, pt, results, answered)
		}()
	}
}

// finish ends the run: succeeded, failed, interrupted if the coordinator
// stopped first (closed: then its tests that never ran get
// STATUS_INTERRUPTED results), or canceled if Cancel was called (then
// they get STATUS_CANCELED results). It decides under a.mu and stores
// without it: Get, Watch and Cancel never wait for the store. The run
// stays active (in m.active: late answers for it wait) until its final
// state is stored; its watchers and the Observer learn it after that.
func (m *Manager) finish(ctx context.Context, a *active, closed bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	a.mu.Lock()
	a.ending = true
	by := a.canceledBy
	// A copy that shares the planned tests (never changed): a.run stays
	// what Get shows until the final state is stored.
	run := testspec.RunHeader(a.run)
	run.Planned = a.run.GetPlanned()
	a.mu.Unlock()
	// Nothing writes a.done any more: the recorder has stopped.
	switch {
	case closed:
		if err := m.interrupt(ctx, run, a.done, "the coordinator stopped before the run ended"); err != nil {
			m.log.Error("store interrupted run", "run_id", run.GetRunId(), "err", err)
		}
	case by != "":
		if err := m.cancelRest(ctx, run, a.done, by); err != nil {
			m.log.Error("store the canceled run's tests", "run_id", run.GetRunId(), "err", err)
		}
	case run.GetTestsFailed() > 0:
		run.State = measurev1.RunState_RUN_STATE_FAILED
		run.Message = fmt.Sprintf("%d of %d tests failed", run.GetTestsFailed(), len(run.GetPlanned()))
	default:
		run.State = measurev1.RunState_RUN_STATE_SUCCEEDED
	}
	if !closed {
		run.EndTime = timestamppb.Now()
		if err := m.cfg.Store.PutRun(ctx, run); err != nil {
			m.log.Error("store finished run", "run_id", run.GetRunId(), "err", err)
		}
		// Every test has a result that no late answer may change; an
		// interrupted run keeps the records of its tests in flight.
		if _, err := m.cfg.Store.DeleteRunDispatched(ctx, run.GetRunId()); err != nil {
			m.log.Warn("forget the run's records of client work in flight", "run_id", run.GetRunId(), "err", err)
		}
	}
	if m.cfg.Observer != nil { // before the watchers learn that the run ended
		m.cfg.Observer.RunEnded(run.GetRunId(), run.GetState())
	}
	a.mu.Lock()
	a.run = run
	u := Update{Run: summary(run)}
	for w := range a.watchers {
		if a.send(w, u) {
			a.drop(w)
		}
	}
	a.mu.Unlock()

	m.mu.Lock()
	delete(m.active, run.GetRunId())
	m.mu.Unlock()
	m.log.Info("run ended", "run_id", run.GetRunId(), "state", run.GetState(), "done", run.GetTestsDone(), "failed", run.GetTestsFailed())
}
