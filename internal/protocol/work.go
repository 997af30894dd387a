package protocol

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// MaxWorkTimeout is the largest Work.timeout an agent takes; a larger one
// is refused as absurd.
const MaxWorkTimeout = 24 * time.Hour

// This file is the one home of the agent protocol's deprecated fields
// (Work.test_id and deadline, WorkResult.test_id, ResultAck.test_ids):
// they are written and read here only, for a peer of the previous version,
// so everywhere else staticcheck's SA1019 flags a use of them.

// WorkID is the ID of one dispatch that w carries: its work_id, or its
// test_id from a coordinator of the previous version, which sends no
// work_id. Empty if w has neither.
func WorkID(w *agentv1.Work) string {
	if id := w.GetWorkId(); id != "" {
		return id
	}
	return w.GetTestId() //nolint:staticcheck // SA1019: a coordinator of the previous version sends test_id alone
}

// ResultWorkID is the ID of the dispatch r answers: its work_id, or its
// test_id from an agent of the previous version, which sends no work_id.
func ResultWorkID(r *agentv1.WorkResult) string {
	if id := r.GetWorkId(); id != "" {
		return id
	}
	return r.GetTestId() //nolint:staticcheck // SA1019: an agent of the previous version sends test_id alone
}

// Stamp names w and bounds it: work_id workID and timeout, and for agents
// of the previous version the same ID in test_id and the deadline
// now+timeout (which they read on their own clock). timeout is what the
// agent gets (see WorkDeadline for its bounds).
func Stamp(w *agentv1.Work, workID string, timeout time.Duration, now time.Time) {
	w.WorkId, w.Timeout = workID, durationpb.New(timeout)
	w.TestId, w.Deadline = workID, timestamppb.New(now.Add(timeout)) //nolint:staticcheck // SA1019: read by agents of the previous version
}

// NewResultAck acknowledges workIDs: a ResultAck with them in work_ids
// and, for agents of the previous version, in test_ids.
func NewResultAck(workIDs []string) *agentv1.ResultAck {
	ack := &agentv1.ResultAck{WorkIds: workIDs}
	ack.TestIds = workIDs //nolint:staticcheck // SA1019: read by agents of the previous version
	return ack
}

// AckedWorkIDs returns the work IDs ack acknowledges: its work_ids, or its
// test_ids from a coordinator of the previous version, which sends no
// work_ids.
func AckedWorkIDs(ack *agentv1.ResultAck) []string {
	if ids := ack.GetWorkIds(); len(ids) > 0 {
		return ids
	}
	return ack.GetTestIds() //nolint:staticcheck // SA1019: a coordinator of the previous version sends test_ids alone
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
	deadline := w.GetDeadline() //nolint:staticcheck // SA1019: a coordinator of the previous version sends deadline alone
	if deadline == nil {
		return time.Time{}, fmt.Errorf("work %q has no timeout and no deadline", WorkID(w))
	}
	return deadline.AsTime(), nil
}

// Answer is the answer to one Work as it is being built (StartAnswer).
type Answer struct {
	// Result is the WorkResult that goes back: its IDs and the kind of
	// its outcome set, its status not yet (Fail, Late, or the caller).
	Result *agentv1.WorkResult
	// ID is the work's ID (WorkID).
	ID string
	// Deadline is when the work must be over (WorkDeadline, on the
	// receiver's clock); zero for a refused work.
	Deadline time.Time
}

// Fail sets the answer's status to st and its message (format and args, as
// fmt.Sprintf), and returns its Result.
func (a Answer) Fail(st measurev1.Status, format string, args ...any) *agentv1.WorkResult {
	a.Result.Status, a.Result.Message = st, fmt.Sprintf(format, args...)
	return a.Result
}

// Late reports whether the work's deadline is not after now and, if so,
// returns its STATUS_TIMEOUT answer: the message names the work, its
// deadline and how long ago it passed, then note (what was done anyway,
// "" for nothing).
func (a Answer) Late(now time.Time, note string) (*agentv1.WorkResult, bool) {
	if a.Deadline.After(now) {
		return nil, false
	}
	return a.Fail(measurev1.Status_STATUS_TIMEOUT, "work %q: deadline %s already passed (%v ago)%s",
		a.ID, a.Deadline.Format(time.RFC3339Nano), now.Sub(a.Deadline).Round(time.Millisecond), note), true
}

// StartAnswer begins the answer to w, which arrived at arrived on the
// receiver's clock: a WorkResult with w's work ID (in work_id and, for
// coordinators of the previous version, test_id) and the outcome of w's
// action, empty, so the coordinator knows which action it answers; and
// when w must be over (WorkDeadline). A Work with no action, no ID or a
// bad timeout is refused: ok is false and the answer's Result has
// STATUS_INVALID and a message naming the field and value.
func StartAnswer(w *agentv1.Work, arrived time.Time) (a Answer, ok bool) {
	a.ID = WorkID(w)
	a.Result = &agentv1.WorkResult{WorkId: a.ID}
	a.Result.TestId = a.ID //nolint:staticcheck // SA1019: read by coordinators of the previous version
	switch w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		a.Result.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{}}
	case *agentv1.Work_RunClient:
		a.Result.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{}}
	case *agentv1.Work_StopServer:
		a.Result.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	default:
		a.Fail(measurev1.Status_STATUS_INVALID, "work %q has no action", a.ID)
		return a, false
	}
	if a.ID == "" {
		a.Fail(measurev1.Status_STATUS_INVALID, "work has no work_id and no test_id")
		return a, false
	}
	deadline, err := WorkDeadline(w, arrived)
	if err != nil {
		a.Fail(measurev1.Status_STATUS_INVALID, "%v", err)
		return a, false
	}
	a.Deadline = deadline
	return a, true
}
