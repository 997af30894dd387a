package runs

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the cancel of a run (MeshService.CancelRun).

// Timing of the cancel of a client in flight.
const (
	// cancelSendTimeout bounds the queueing of one cancel_client.
	cancelSendTimeout = 5 * time.Second
	// cancelResend is how long a canceled client may go on answering
	// before its cancel is sent again: a cancel that overtook its
	// RunClient on the agent is ignored there.
	cancelResend = 2 * time.Second
	// cancelSends bounds the cancel_client sent for one client.
	cancelSends = 3
)

// Cancel cancels a run in progress (queued, or running: a continuous
// run's round included; the monitor starts its next round as usual) and
// returns its header without its planned tests. From then on no test of
// it starts; the clients running get cancel_client on their source agent
// and answer with STATUS_CANCELED results (or with their results if they
// ended first), their servers are stopped, and once they all answered the
// run ends RUN_STATE_CANCELED: "canceled by " + by (who asked; empty
// means "a client"), with every test that had no result yet recorded
// STATUS_CANCELED. The header returned may still be RUN_STATE_QUEUED or
// RUN_STATE_RUNNING; Watch it to see it end. A run that already ended (or
// is being canceled, or whose end is being stored) is returned unchanged.
// Cancel never waits for the store while the run is in progress. The
// error wraps ErrNotFound.
func (m *Manager) Cancel(ctx context.Context, runID, by string) (*measurev1.Run, error) {
	if by == "" {
		by = "a client"
	}
	m.mu.Lock()
	a := m.active[runID]
	m.mu.Unlock()
	if a == nil {
		run, err := m.Get(ctx, runID) // ended: unchanged
		if err != nil {
			return nil, err
		}
		run.Planned = nil
		return run, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !testspec.RunEnded(a.run.GetState()) && a.canceledBy == "" && !a.ending {
		a.canceledBy = by
		a.cancel()
		m.log.Info("run canceled", "run_id", runID, "by", by, "done", a.run.GetTestsDone(), "planned", a.run.GetTestsPlanned())
	}
	h := summary(a.run)
	h.Spec = proto.CloneOf(a.run.GetSpec())
	return h, nil
}

// cancelRest ends run as canceled by by: its tests without a result (not
// keys of done) get a STATUS_CANCELED result, in grouped writes; the
// caller sets the end time and writes the header.
func (m *Manager) cancelRest(ctx context.Context, run *measurev1.Run, done map[string]bool, by string) error {
	why := "canceled by " + by
	err := m.endRest(ctx, run, done, measurev1.Status_STATUS_CANCELED, "the run was "+why+" before this test ran")
	run.State, run.Message = measurev1.RunState_RUN_STATE_CANCELED, why
	return err
}

// cancelClient sends cancel_client for the client work workID to node,
// and again every cancelResend (at most cancelSends in all) until
// answered is closed: the dispatch of that client returned. The sends
// have ctx's values, not its end: ctx is the run's, ended by the cancel.
func (m *Manager) cancelClient(ctx context.Context, node, workID string, answered <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for i := 0; i < cancelSends; i++ {
		select {
		case <-answered:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelSendTimeout)
		w := &agentv1.Work{Action: &agentv1.Work_CancelClient{CancelClient: &agentv1.CancelClient{}}}
		protocol.Stamp(w, workID, cancelSendTimeout, time.Now())
		err := m.cfg.Agents.Send(ctx, node, w)
		cancel()
		if err != nil {
			m.log.Warn("cancel a client", "node", node, "work_id", workID, "err", err)
			return // no session: the client's answer ends the wait anyway
		}
		m.log.Debug("cancel_client sent", "node", node, "work_id", workID, "attempt", i+1)
		t.Reset(cancelResend)
	}
}

// cutResult is the result of a test that the end of its run stopped
// before its client ran (what says when): STATUS_INTERRUPTED if the
// coordinator is stopping (Close), STATUS_CANCELED if the run was
// canceled.
func (m *Manager) cutResult(pt *measurev1.PlannedTest, start time.Time, what string) []*measurev1.Result {
	status, msg := measurev1.Status_STATUS_CANCELED, "the run was canceled "+what
	if m.closing() {
		status, msg = measurev1.Status_STATUS_INTERRUPTED, "the coordinator stopped "+what
	}
	return []*measurev1.Result{{
		Spec: pt.GetSpec(), Status: status, Message: msg,
		StartTime: timestamppb.New(start), Elapsed: durationpb.New(time.Since(start)),
	}}
}
