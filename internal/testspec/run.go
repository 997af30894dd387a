package testspec

import (
	"strings"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ContinuousLabelPrefix starts the label of every run of the continuous
// monitor (coordinator/config labels them "monitor-" + the schedule's
// name). A run's origin (measurev1.Run.Origin) says whose it is; for runs
// stored before origins were recorded the label tells (OriginOf), so
// MeshService refuses the prefix in a TriggerRun: no client's run passes
// for the monitor's, old or new.
const ContinuousLabelPrefix = "monitor-"

// IsContinuous reports whether label is a continuous monitor run's.
func IsContinuous(label string) bool { return strings.HasPrefix(label, ContinuousLabelPrefix) }

// OriginOf returns who started run: its origin as the coordinator recorded
// it, or for a run stored before origins were (RUN_ORIGIN_UNSPECIFIED)
// RUN_ORIGIN_MONITOR when its label is a continuous one (IsContinuous)
// and RUN_ORIGIN_CLIENT otherwise. The alerter judges only the monitor's
// runs as the mesh's standing verdict, and the web UI prefers them.
func OriginOf(run *measurev1.Run) measurev1.RunOrigin {
	switch o := run.GetOrigin(); {
	case o != measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED:
		return o
	case IsContinuous(run.GetSpec().GetLabel()):
		return measurev1.RunOrigin_RUN_ORIGIN_MONITOR
	default:
		return measurev1.RunOrigin_RUN_ORIGIN_CLIENT
	}
}

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
		Origin:       run.GetOrigin(),
		// Which rounds of the mesh: the monitor's next run starts after
		// them (from the store's header).
		MeshRounds:     run.GetMeshRounds(),
		MeshRoundCount: run.GetMeshRoundCount(),
	}
}
