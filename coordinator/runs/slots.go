package runs

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the execution of a run's tests as schedule.Arrange lays
// them out: execute, the run's goroutine, takes the light tests in waves
// (runLight), then the heavy slots round by round (runSlot), then the
// queues to external targets (runExternalQueues, extservers.go); each
// test holds its nodes in the Gate, and a heavy slot or queue a place in
// the spec's max_concurrent_heavy (takeLimit), while it runs, and its
// results go to the recorder (store). One test's work with the agents is
// execTest (exec.go).

// lightJitter bounds the random delay before each light test asks for its
// nodes, so that the agents of a mesh do not all probe in step. A test
// holds no node while it waits: the delay spreads the tests' starts, it
// does not idle a node's light slots.
const lightJitter = 100 * time.Millisecond

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

// takeLimit takes a place in limit, the run's bound on the heavy slots
// and external queues under way at once (nil: no bound), and returns the
// function that gives it back; ok is false, and nothing is taken, if ctx
// ends first.
func takeLimit(ctx context.Context, limit chan struct{}) (release func(), ok bool) {
	if limit == nil {
		return func() {}, true
	}
	select {
	case limit <- struct{}{}:
		return func() { <-limit }, true
	case <-ctx.Done():
		return nil, false
	}
}

// runSlot runs one pair's heavy tests in turn, holding the pair in the
// Gate (which only waits if another run uses one of its nodes).
func (m *Manager) runSlot(ctx context.Context, a *active, rec *recorder, slot schedule.Slot, limit chan struct{}) {
	unlimit, ok := takeLimit(ctx, limit)
	if !ok {
		return
	}
	defer unlimit()
	release, err := m.cfg.Gate.Acquire(ctx, true, slot.Pair.Src, slot.Pair.Dst)
	if err != nil {
		return
	}
	defer release()
	for i, pt := range slot.Tests {
		if m.halted(ctx) {
			return
		}
		if i == 0 {
			rec.started()
		}
		results, answered := m.execTest(ctx, a.run.GetRunId(), pt)
		m.store(a, rec, pt, results, answered)
	}
}

// halted reports whether the run of ctx is to start no more tests: it was
// canceled, or the coordinator is stopping (Close closes stopc a moment
// before the run's context ends). A test it stops before its work was
// sent has no result: the run's end gives it one (finish).
func (m *Manager) halted(ctx context.Context) bool {
	return ctx.Err() != nil || m.closing()
}

// runGated runs one test holding src and dst in the Gate (heavy or light;
// dst is a node, schedule.GateKey of an external target, or "" for src
// alone) while its agents work: they go back as soon as the test was
// executed, before its results are stored. It reports false, and runs
// nothing, if the Gate gave up waiting (ctx ended).
func (m *Manager) runGated(ctx context.Context, a *active, rec *recorder, pt *measurev1.PlannedTest, heavy bool, src, dst string) bool {
	release, err := m.cfg.Gate.Acquire(ctx, heavy, src, dst)
	if err != nil {
		return false
	}
	if m.halted(ctx) { // the Gate chose the free place over the end
		release()
		return false
	}
	rec.started()
	results, answered := m.execTest(ctx, a.run.GetRunId(), pt)
	release()
	m.store(a, rec, pt, results, answered)
	return true
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
// back as soon as its agent answered, before its results are stored
// (runGated). At most the Gate's light limit times the run's nodes are
// under way at once (waiting, running or being stored), so a big run's
// waiting tests stay bounded.
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
	for _, pt := range tests {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		dst := testspec.DestOf(pt).Node() // "" for a target: no node to hold
		wg.Add(1)
		go func() { // owner: runLight, which waits for it
			defer wg.Done()
			defer func() { <-window }()
			jitter := time.NewTimer(rand.N(lightJitter))
			select {
			case <-jitter.C:
			case <-ctx.Done():
				jitter.Stop()
				return
			}
			m.runGated(ctx, a, rec, pt, false, pt.GetSrcNode(), dst)
		}()
	}
}
