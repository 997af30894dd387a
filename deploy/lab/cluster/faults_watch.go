package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// This file holds how the faults demo watches the coordinator: its runs
// through the API, its verdicts through its log.

// coordinatorSaid waits (at most 10 s) until the coordinator's log has a
// "fault localised" or "fault persists" line for each finding of runID,
// and fails if it has one for another node or kind.
func (d *faultsDemo) coordinatorSaid(ctx context.Context, runID string, findings []diagnose.Finding) error {
	want := map[string]bool{}
	for _, f := range findings {
		want[fmt.Sprintf("node=%s kind=%s run_id=%s", f.Node, f.Kind, runID)] = true
	}
	var got map[string]bool
	for range 40 {
		b, err := os.ReadFile(d.c.LogPath("coordinator"))
		if err != nil {
			return err
		}
		got = map[string]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `msg="fault localised"`) && !strings.Contains(line, `msg="fault persists"`) {
				continue
			}
			if _, rest, ok := strings.Cut(line, " node="); ok && strings.Contains(rest, "run_id="+runID+" ") {
				node, _, _ := strings.Cut(rest, " ")
				_, kind, _ := strings.Cut(rest, "kind=")
				kind, _, _ = strings.Cut(kind, " ")
				got[fmt.Sprintf("node=%s kind=%s run_id=%s", node, kind, runID)] = true
			}
		}
		if maps.Equal(got, want) {
			return nil
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	return fmt.Errorf("the coordinator's log says %v of run %s, diagnose says %v", slices.Sorted(maps.Keys(got)), runID, slices.Sorted(maps.Keys(want)))
}

// pollEvery is how often the demo asks the coordinator about its runs.
const pollEvery = 250 * time.Millisecond

// waitIdle waits until no run is queued or running, so that the next
// tick is not skipped for one.
func (d *faultsDemo) waitIdle(ctx context.Context) error {
	deadline := time.Now().Add(d.runTimeout())
	for {
		runs, err := d.client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 5})
		if err == nil && !slices.ContainsFunc(runs.GetRuns(), inProgress) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a run is still in progress after %v (last error %v)", d.runTimeout(), err)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// runTimeout bounds the wait for one continuous run: a tick and a run of
// the demo's mesh (about 20 s on 3 nodes).
func (d *faultsDemo) runTimeout() time.Duration { return d.cfg.Interval + d.jitter + 3*time.Minute }

func inProgress(r *measurev1.Run) bool {
	return r.GetState() == measurev1.RunState_RUN_STATE_QUEUED || r.GetState() == measurev1.RunState_RUN_STATE_RUNNING
}

// firstAfter returns the oldest continuous run created after t0, if any.
func (d *faultsDemo) firstAfter(ctx context.Context, t0 time.Time) (*measurev1.Run, error) {
	runs, err := d.client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 10})
	if err != nil {
		return nil, err
	}
	var first *measurev1.Run
	for _, r := range runs.GetRuns() { // newest first
		if strings.HasPrefix(r.GetSpec().GetLabel(), "monitor-") && r.GetCreateTime().AsTime().After(t0) {
			first = r
		}
	}
	return first, nil
}

// waitRunning waits for the first continuous run after t0 to have some
// but not all of its tests done.
func (d *faultsDemo) waitRunning(ctx context.Context, t0 time.Time) (*measurev1.Run, error) {
	deadline := time.Now().Add(d.runTimeout())
	for {
		r, err := d.firstAfter(ctx, t0)
		if err == nil && r != nil {
			if !inProgress(r) {
				return nil, fmt.Errorf("run %s ended before it could be cut", r.GetRunId())
			}
			if r.GetState() == measurev1.RunState_RUN_STATE_RUNNING && r.GetTestsDone() > 0 {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no continuous run under way within %v (last error %v)", d.runTimeout(), err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// nextRun waits for the first continuous run created after t0 to end and
// diagnoses it.
func (d *faultsDemo) nextRun(ctx context.Context, t0 time.Time) (*measurev1.Run, []diagnose.Finding, error) {
	deadline := time.Now().Add(d.runTimeout())
	for {
		r, err := d.firstAfter(ctx, t0)
		if err == nil && r != nil && !inProgress(r) {
			results, err := d.results(ctx, r.GetRunId())
			if err != nil {
				return nil, nil, err
			}
			return r, diagnose.Diagnose(results), nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("no continuous run ended within %v (last error %v)", d.runTimeout(), err)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, nil, err
		}
	}
}

func (d *faultsDemo) results(ctx context.Context, runID string) ([]*measurev1.Result, error) {
	return RunResults(ctx, d.client, runID)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeSaid says what the coordinator's probe judge logged ("probe fault
// localised") from t0 on: each node and kind with its delay after t0, and
// whether that is the scenario's node and kind.
func (d *faultsDemo) probeSaid(t0 time.Time, s faultScenario) string {
	b, err := os.ReadFile(d.c.LogPath("coordinator"))
	if err != nil {
		return fmt.Sprintf("cannot read the coordinator's log: %v", err)
	}
	var said []string
	match := false
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="probe fault localised"`) {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(t0) {
			continue
		}
		_, node, _ := strings.Cut(line, " node=")
		node, _, _ = strings.Cut(node, " ")
		_, kind, _ := strings.Cut(line, " kind=")
		kind, _, _ = strings.Cut(kind, " ")
		said = append(said, fmt.Sprintf("%s on %s %.1fs after the fault", kind, node, at.Sub(t0).Seconds()))
		match = match || node == s.node && kind == string(s.kind)
	}
	switch {
	case len(said) == 0 && s.node == "":
		return "OK: no alarm"
	case len(said) == 0:
		return "nothing localised"
	case match:
		return "OK: " + strings.Join(said, "; ")
	}
	return "OTHER: " + strings.Join(said, "; ")
}
