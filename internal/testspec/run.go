package testspec

import (
	"strings"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ContinuousLabelPrefix starts the label of every run of the continuous
// monitor (coordinator/config labels them "monitor-" + the schedule's
// name): the alerter judges those runs' findings as the mesh's standing
// verdict, and the web UI prefers them. MeshService refuses it in a
// TriggerRun, so that no client's run passes for the monitor's.
const ContinuousLabelPrefix = "monitor-"

// IsContinuous reports whether label is a continuous monitor run's.
func IsContinuous(label string) bool { return strings.HasPrefix(label, ContinuousLabelPrefix) }

// RunHeader returns run's header: every field but the planned tests
// (measurev1.Run.Planned), which are the bulk of a big run. It is what
// the store writes on every progress step, what the store's run list
// returns, and, without its spec, what a run's watchers get. The copy is
// shallow: the header shares run's spec and timestamps, so a caller that
// goes on changing run in place clones the header (proto.CloneOf) before
// handing it over. A field added to measurev1.Run must be decided here,
// as part of the header or not (TestRunHeaderFields fails until it is).
func RunHeader(run *measurev1.Run) *measurev1.Run {
	if run == nil {
		return nil
	}
	return &measurev1.Run{
		RunId:        run.GetRunId(),
		Spec:         run.GetSpec(),
		State:        run.GetState(),
		Message:      run.GetMessage(),
		CreateTime:   run.GetCreateTime(),
		EndTime:      run.GetEndTime(),
		TestsDone:    run.GetTestsDone(),
		TestsFailed:  run.GetTestsFailed(),
		TestsPlanned: run.GetTestsPlanned(),
		Rounds:       run.GetRounds(),
	}
}
