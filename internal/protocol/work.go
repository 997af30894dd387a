package protocol

import (
	"fmt"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
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
