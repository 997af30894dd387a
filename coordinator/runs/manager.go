// Package runs owns the life of a run: it plans it (coordinator/schedule),
// executes every planned test through the agents (start the server on the
// destination, run the client on the source, stop the server), stores every
// result, keeps the run's progress and streams it to watchers.
package runs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/coordinator/schedule"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the Manager itself: what it needs (Agents, Store, an
// Observer, Config), the state it keeps of the runs in progress (active),
// its construction (New) and its lifetime: Close closes stopc, which ends
// every run, and waits on wg for the runs' goroutines; untilClose gives
// the work that only Close may cut a context of its own. A run's states
// are in lifecycle.go, the execution of its tests in slots.go and exec.go.

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
	// client work workIDs are stored (or never will be); acks queued
	// before a Dispatch to that node reach the agent before its work.
	Ack(node string, workIDs ...string)
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
	ExternalTargets []*measurev1.ExternalTarget
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

// New returns a Manager. Runs that a previous coordinator left queued or
// running are marked interrupted (interruptUnfinished): each of their
// planned tests without results gets a STATUS_INTERRUPTED placeholder,
// which the test's real results replace if its agent sends them late (see
// late). Then New installs the manager as cfg.Agents' late handler.
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
	m := &Manager{cfg: cfg, log: log, stopc: make(chan struct{}), active: map[string]*active{}, extBackoff: externalBusyBackoff}
	if err := m.interruptUnfinished(ctx); err != nil {
		return nil, err
	}
	if n, err := cfg.Store.PruneDispatched(ctx, time.Now().Add(-DispatchedMaxAge)); err != nil {
		log.Warn("prune the records of client work in flight", "err", err)
	} else if n > 0 {
		log.Info("records of client work in flight that never got an answer pruned", "records", n, "older_than", DispatchedMaxAge)
	}
	cfg.Agents.HandleLate(m.late)
	return m, nil
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
