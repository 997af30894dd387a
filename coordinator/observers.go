package coordinator

import (
	"context"
	"slices"

	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the adapters Run wires the run manager with: the
// monitor's view of the runs in progress, and the fan-out of a run's
// events to several observers.

// monitorRuns gives the monitor the run manager's Trigger, the newest run
// of a label from the store (NewestRun), and the runs
// in progress from its memory (Active): the store would decode every run
// header of the retention window at every tick.
type monitorRuns struct {
	*runs.Manager
	*store.Store
}

// Runs returns the runs in progress whose state is one of states (any, if
// none is given).
func (r monitorRuns) Runs(_ context.Context, states ...measurev1.RunState) ([]*measurev1.Run, error) {
	return slices.DeleteFunc(r.Active(), func(run *measurev1.Run) bool {
		return len(states) > 0 && !slices.Contains(states, run.GetState())
	}), nil
}

// observers tells each of several runs.Observers.
type observers []runs.Observer

func (os observers) RunStarted(runID string) {
	for _, o := range os {
		o.RunStarted(runID)
	}
}

func (os observers) Recorded(results []*measurev1.Result) {
	for _, o := range os {
		o.Recorded(results)
	}
}

func (os observers) RunEnded(runID string, state measurev1.RunState) {
	for _, o := range os {
		o.RunEnded(runID, state)
	}
}
