package protocol

import (
	"fmt"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// MaxWorkTimeout is the largest Work.timeout an agent takes; a larger one
// is refused as absurd.
const MaxWorkTimeout = 24 * time.Hour

// WorkID is the ID of one dispatch that w carries: its work_id, or its
// test_id from a coordinator of the previous version, which sends no
// work_id. Empty if w has neither.
func WorkID(w *agentv1.Work) string {
	if id := w.GetWorkId(); id != "" {
		return id
	}
	return w.GetTestId()
}

// ResultWorkID is the ID of the dispatch r answers: its work_id, or its
// test_id from an agent of the previous version, which sends no work_id.
func ResultWorkID(r *agentv1.WorkResult) string {
	if id := r.GetWorkId(); id != "" {
		return id
	}
	return r.GetTestId()
}

// WorkDeadline is when w, which arrived at arrived on the receiver's
// clock, must be over: arrived plus w's timeout when set, else w's
// absolute deadline (the deprecated field of coordinators of the previous
// version, read on the receiver's clock). A timeout that is not a valid
// Duration, not positive or over MaxWorkTimeout, and a Work with neither
// field, is an error naming the work, the field and its value.
func WorkDeadline(w *agentv1.Work, arrived time.Time) (time.Time, error) {
	if t := w.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil {
			return time.Time{}, fmt.Errorf("work %q: timeout %v: %w", WorkID(w), t, err)
		}
		d := t.AsDuration()
		if d <= 0 || d > MaxWorkTimeout {
			return time.Time{}, fmt.Errorf("work %q: timeout %v: want more than 0 and at most %v", WorkID(w), d, MaxWorkTimeout)
		}
		return arrived.Add(d), nil
	}
	if w.GetDeadline() == nil {
		return time.Time{}, fmt.Errorf("work %q has no timeout and no deadline", WorkID(w))
	}
	return w.GetDeadline().AsTime(), nil
}

// StartAnswer begins the answer to w, which arrived at arrived on the
// receiver's clock: a WorkResult with w's work ID (in work_id and, for
// coordinators of the previous version, test_id) and the outcome of w's
// action, empty, so the coordinator knows which action it answers; and
// when w must be over (WorkDeadline). A Work with no action, no ID or a
// bad timeout is refused: ok is false and the answer has STATUS_INVALID
// and a message naming the field and value.
func StartAnswer(w *agentv1.Work, arrived time.Time) (res *agentv1.WorkResult, deadline time.Time, ok bool) {
	id := WorkID(w)
	res = &agentv1.WorkResult{TestId: id, WorkId: id}
	refuse := func(format string, args ...any) (*agentv1.WorkResult, time.Time, bool) {
		res.Status, res.Message = measurev1.Status_STATUS_INVALID, fmt.Sprintf(format, args...)
		return res, time.Time{}, false
	}
	switch w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		res.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{}}
	case *agentv1.Work_RunClient:
		res.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{}}
	case *agentv1.Work_StopServer:
		res.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	default:
		return refuse("work %q has no action", id)
	}
	if id == "" {
		return refuse("work has no work_id and no test_id")
	}
	deadline, err := WorkDeadline(w, arrived)
	if err != nil {
		return refuse("%v", err)
	}
	return res, deadline, true
}
