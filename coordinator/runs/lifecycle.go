package runs

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds a run's states: Trigger plans and stores it
// RUN_STATE_QUEUED and starts its goroutine (counted in Manager.wg, which
// Close waits for); its recorder turns it RUN_STATE_RUNNING (record.go);
// finish decides its end under a.mu and stores it outside the lock, then
// forgets it; Get reads it, in progress or stored. interrupt and endRest
// give the planned tests a run never ran their placeholder results, for a
// run Close cut, and for the runs a previous coordinator left unfinished
// (interruptUnfinished, at New). Cancel is in cancel.go.

// interruptUnfinished marks interrupted the runs the store holds queued
// or running: a previous coordinator stopped before they ended. Their
// counters are recounted from the stored results first. The error names
// the run it failed on.
func (m *Manager) interruptUnfinished(ctx context.Context) error {
	stale, err := m.cfg.Store.Runs(ctx, measurev1.RunState_RUN_STATE_QUEUED, measurev1.RunState_RUN_STATE_RUNNING)
	if err != nil {
		return fmt.Errorf("runs: load unfinished runs: %w", err)
	}
	for _, hdr := range stale {
		run, err := m.cfg.Store.GetRun(ctx, hdr.GetRunId())
		if err == nil {
			var tests map[string]bool
			if tests, err = m.cfg.Store.RunTests(ctx, run.GetRunId()); err == nil {
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
			return fmt.Errorf("runs: mark run %s interrupted: %w", hdr.GetRunId(), err)
		}
		m.log.Warn("run interrupted by a coordinator restart", "run_id", run.GetRunId(), "done", run.GetTestsDone(), "planned", len(run.GetPlanned()))
	}
	return nil
}

// Trigger plans spec over every known node, stores the run and starts it;
// it returns the run as stored, RUN_STATE_QUEUED (it becomes
// RUN_STATE_RUNNING once its first test has its nodes, see execute).
// A node whose agent is not connected, or that gossip declares dead, stays
// in the plan: its tests end at once with STATUS_AGENT_UNAVAILABLE, so a
// lost agent shows as a failure rather than vanishing from the mesh.
// origin is who asks (RUN_ORIGIN_CLIENT or RUN_ORIGIN_MONITOR), stored
// with the run. Errors wrap schedule.ErrInvalid (an unspecified origin
// too) or schedule.ErrNoPairs.
func (m *Manager) Trigger(ctx context.Context, spec *measurev1.RunSpec, origin measurev1.RunOrigin) (*measurev1.Run, error) {
	if origin != measurev1.RunOrigin_RUN_ORIGIN_CLIENT && origin != measurev1.RunOrigin_RUN_ORIGIN_MONITOR {
		return nil, fmt.Errorf("%w: run origin %v", schedule.ErrInvalid, origin)
	}
	// Unknown fields (a client's, up to a message's size) would be copied
	// into every planned test, stored, and sent to the agents in each
	// Work: they are dropped from a copy; the caller's spec is left alone.
	spec = proto.CloneOf(spec)
	protocol.ClearUnknown(spec)
	release, err := m.reserveRun()
	if err != nil {
		return nil, err
	}
	defer release()
	mesh, targetable := m.cfg.Agents.Known()
	plan, err := schedule.PlanRun(spec, schedule.Nodes{Mesh: mesh, Targetable: targetable, External: m.cfg.ExternalTargets,
		Families: func(node string) []measurev1.IPFamily {
			if n, ok := m.cfg.Agents.Node(node); ok {
				return n.Families()
			}
			return nil // not connected: IPv4, and its tests fail as unavailable
		}})
	if err != nil {
		return nil, err
	}
	planned := plan.Tests
	arr := schedule.Arrange(planned, plan.Mesh.Nodes)
	run := &measurev1.Run{
		RunId: ulid.Make().String(), Spec: spec, State: measurev1.RunState_RUN_STATE_QUEUED,
		CreateTime: timestamppb.Now(), Planned: planned, TestsPlanned: uint32(len(planned)), Rounds: uint32(len(arr.Rounds)),
		Origin: origin, MeshRounds: uint32(plan.Mesh.Rounds), MeshRoundCount: uint32(plan.Mesh.Count),
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
	m.log.Info("run started", "run_id", run.GetRunId(), "tests", len(planned), "nodes", len(mesh),
		"mesh_rounds", plan.Mesh.Rounds, "of", plan.Mesh.Count)
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

// Active returns the headers of the runs in progress (not yet ended),
// oldest first: ID, spec, state, origin and create time, no planned
// tests. It reads the manager's memory, never the store (which holds every
// run of the retention window), so that the monitor can ask at every tick.
// The specs are shared with the runs: do not change them.
func (m *Manager) Active() []*measurev1.Run {
	m.mu.Lock()
	as := slices.Collect(maps.Values(m.active))
	m.mu.Unlock()
	out := make([]*measurev1.Run, 0, len(as))
	for _, a := range as {
		a.mu.Lock() // the run's state changes under it
		if r := a.run; !testspec.RunEnded(r.GetState()) {
			out = append(out, &measurev1.Run{RunId: r.GetRunId(), Spec: r.GetSpec(), State: r.GetState(), Origin: r.GetOrigin(), CreateTime: r.GetCreateTime()})
		}
		a.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b *measurev1.Run) int {
		return cmp.Or(a.GetCreateTime().AsTime().Compare(b.GetCreateTime().AsTime()), strings.Compare(a.GetRunId(), b.GetRunId()))
	})
	return out
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
	// The final state is what Get, Cancel and a new Watch see from here
	// on (the store holds it too), before anyone is told the run ended.
	a.mu.Lock()
	a.run = run
	a.mu.Unlock()
	m.mu.Lock()
	delete(m.active, run.GetRunId())
	m.mu.Unlock()
	if m.cfg.Observer != nil { // before the watchers learn that the run ended
		m.cfg.Observer.RunEnded(run.GetRunId(), run.GetState())
	}
	a.mu.Lock()
	u := Update{Run: summary(run)}
	for w := range a.watchers {
		if a.send(w, u) {
			a.drop(w)
		}
	}
	a.mu.Unlock()
	m.log.Info("run ended", "run_id", run.GetRunId(), "state", run.GetState(), "done", run.GetTestsDone(), "failed", run.GetTestsFailed())
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
