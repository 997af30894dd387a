package runs

import (
	"context"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// lateTimeout bounds the handling of one batch of late client answers.
const lateTimeout = 30 * time.Second

// late is the registry's LateHandler: it takes the client answers that no
// Dispatch waited for, mostly answers an agent kept while the coordinator
// was gone and sends again after reconnecting. An answer whose work ID
// names a known run (RUN_ID/TEST_ID), a planned test of it and, as that
// test's source, the node that sent it, and whose client work the store's
// dispatch record (PutDispatched, kept across restarts) says went to that
// node and is still in flight, is sanitized against the planned test, its
// figures checked (checkFigures), and stored in place of the test's
// STATUS_INTERRUPTED placeholder
// (fixing the run's counters); a test that already has real results keeps
// them. Either way the answer is acknowledged, and so is one that names no
// test of this node or one it did not have in flight, which is refused
// and logged (a warning naming the reason): the agent would send it
// forever otherwise. An answer for a run still in progress, or one the store
// failed to take, is left unacknowledged: the agent keeps it and sends it
// again on its next session.
func (m *Manager) late(ctx context.Context, node string, answers []*agentv1.WorkResult) {
	if m.closing() {
		return // closing: the agents keep these for the next coordinator
	}
	ctx, cancel := context.WithTimeout(ctx, lateTimeout)
	defer cancel()
	var (
		acks  []string
		tests [][]*measurev1.Result
		ids   []string // the work ID of each element of tests
	)
	plans := map[string]*runPlan{} // by run ID; nil: no such run
	for _, wr := range answers {
		id := protocol.ResultWorkID(wr)
		log := m.log.With("node", node, "work_id", id)
		// Refusals are the agent's doing, as many as it sends: at most one
		// line a minute per node and kind, with a count of the others.
		refuse := func(msg string, args ...any) {
			m.warn.Warn(m.log, node, msg, append([]any{"work_id", id}, args...)...)
		}
		runID, testID, ok := strings.Cut(id, "/")
		if !ok || runID == "" || testID == "" {
			refuse("late client result names no run's test; acknowledged, not stored")
			acks = append(acks, id)
			continue
		}
		if m.isActive(runID) {
			log.Debug("late client result for a run in progress; left with the agent until its next session")
			continue
		}
		plan, err := m.plan(ctx, plans, runID)
		if err != nil {
			log.Error("late client result: read its run; left with the agent", "err", err)
			continue
		}
		var pt *measurev1.PlannedTest
		if plan != nil {
			pt = plan.tests[testID]
		}
		switch {
		case plan == nil:
			refuse("late client result of an unknown run; acknowledged, not stored")
		case pt == nil:
			refuse("late client result of a test its run did not plan; acknowledged, not stored")
		case pt.GetSrcNode() != node:
			refuse("late client result refused: from a node that is not its test's source; acknowledged, not stored", "source", pt.GetSrcNode())
		default:
			to, at, inFlight, err := m.cfg.Store.Dispatched(ctx, id)
			switch {
			case err != nil:
				log.Error("late client result: read its dispatch record; left with the agent", "err", err)
				continue
			case !inFlight:
				refuse("late client result refused: the test was not in flight on this node (no dispatch record); acknowledged, not stored")
				acks = append(acks, id)
				continue
			case to != node:
				refuse("late client result refused: the test was dispatched to another node; acknowledged, not stored", "dispatched_to", to)
				acks = append(acks, id)
				continue
			}
			// The dispatch record's time is when the client work went out:
			// what the answer's start times are checked against.
			start := at
			if start.IsZero() {
				start = plan.run.GetCreateTime().AsTime()
			}
			tests = append(tests, m.checkFigures(pt, sanitize(runID, pt, clientResults(pt, wr, start, 0), start)))
			ids = append(ids, id)
			continue
		}
		acks = append(acks, id)
	}
	if len(tests) > 0 {
		replaced, err := m.cfg.Store.ReplaceInterrupted(ctx, tests)
		if err != nil {
			m.log.Error("store late client results; left with the agent", "node", node, "results", len(tests), "err", err)
		} else if err := m.cfg.Store.DeleteDispatched(ctx, ids...); err != nil {
			// Harmless: the test has results now, which no later answer replaces.
			m.log.Warn("forget the records of answered client work", "node", node, "tests", len(ids), "err", err)
		}
		for i, ok := range replaced {
			if ok {
				m.log.Info("late client result replaces its interrupted placeholder", "node", node, "work_id", ids[i], "status", tests[i][0].GetStatus())
				if m.cfg.Observer != nil {
					m.cfg.Observer.Recorded(tests[i])
				}
			} else {
				m.log.Info("late client result not stored: its test has results already", "node", node, "work_id", ids[i])
			}
			acks = append(acks, ids[i])
		}
	}
	m.cfg.Agents.Ack(node, acks...)
}

// runPlan is a stored run with its planned tests by test ID.
type runPlan struct {
	run   *measurev1.Run
	tests map[string]*measurev1.PlannedTest
}

// plan returns runID's plan from cache, or reads it into cache; nil if the
// run does not exist.
func (m *Manager) plan(ctx context.Context, cache map[string]*runPlan, runID string) (*runPlan, error) {
	if p, ok := cache[runID]; ok {
		return p, nil
	}
	run, err := m.cfg.Store.GetRun(ctx, runID)
	if m.cfg.IsNotFound(err) {
		cache[runID] = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := &runPlan{run: run, tests: make(map[string]*measurev1.PlannedTest, len(run.GetPlanned()))}
	for _, pt := range run.GetPlanned() {
		p.tests[pt.GetTestId()] = pt
	}
	cache[runID] = p
	return p, nil
}

// isActive reports whether runID is in progress in this manager.
func (m *Manager) isActive(runID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active[runID] != nil
}
