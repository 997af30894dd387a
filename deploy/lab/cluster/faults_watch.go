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
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/tick"
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
		if err := tick.Sleep(ctx, pollEvery); err != nil {
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
			return fmt.Errorf("a run is still in progress after %v (last error %v)", d.runTimeout(), err) //nolint:errorlint // the last poll's error, nil when the poll succeeded, is context, not the cause
		}
		if err := tick.Sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// runTimeout bounds the wait for one continuous run: a tick and a run of
// the demo's mesh (about 20 s on 3 nodes).
func (d *faultsDemo) runTimeout() time.Duration { return d.cfg.Interval + d.jitter + 3*time.Minute }

// inProgress reports whether r has not ended yet (testspec.RunEnded).
func inProgress(r *measurev1.Run) bool { return !testspec.RunEnded(r.GetState()) }

// firstAfter returns the oldest continuous run created after t0, if any.
func (d *faultsDemo) firstAfter(ctx context.Context, t0 time.Time) (*measurev1.Run, error) {
	runs, err := d.client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 10})
	if err != nil {
		return nil, err
	}
	var first *measurev1.Run
	for _, r := range runs.GetRuns() { // newest first
		if testspec.IsContinuous(r.GetSpec().GetLabel()) && r.GetCreateTime().AsTime().After(t0) {
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
			return nil, fmt.Errorf("no continuous run under way within %v (last error %v)", d.runTimeout(), err) //nolint:errorlint // the last poll's error, nil when the poll succeeded, is context, not the cause
		}
		if err := tick.Sleep(ctx, 50*time.Millisecond); err != nil {
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
			return nil, nil, fmt.Errorf("no continuous run ended within %v (last error %v)", d.runTimeout(), err) //nolint:errorlint // the last poll's error, nil when the poll succeeded, is context, not the cause
		}
		if err := tick.Sleep(ctx, pollEvery); err != nil {
			return nil, nil, err
		}
	}
}

func (d *faultsDemo) results(ctx context.Context, runID string) ([]*measurev1.Result, error) {
	return RunResults(ctx, d.client, runID)
}

// bandwidthScenario judges a bandwidth fault from the first continuous
// run after t0, its iperf3 results alone (the heavy mesh; the agents
// report them as they do every run's): detected when it started within
// one run interval (plus jitter) and names s.node, localised when with
// s.kind. It returns the findings on other nodes or of other kinds, and
// what to print: the head of the scenario's line, then lines below it.
func (d *faultsDemo) bandwidthScenario(ctx context.Context, s faultScenario, t0 time.Time) (detected, localised bool, others []diagnose.Finding, head string, lines []string, err error) {
	run, findings, err := d.nextRun(ctx, t0)
	if err != nil {
		return false, false, nil, "", nil, fmt.Errorf("scenario %s: %w", s.name, err)
	}
	// The coordinator judges its continuous runs itself (coordinator/alert):
	// its log must say what diagnose says.
	if err := d.coordinatorSaid(ctx, run.GetRunId(), findings); err != nil {
		return false, false, nil, "", nil, fmt.Errorf("scenario %s: %w", s.name, err)
	}
	results, err := d.results(ctx, run.GetRunId())
	if err != nil {
		return false, false, nil, "", nil, err
	}
	var heavy []*measurev1.Result
	for _, r := range results {
		if r.GetSpec().GetTest() == measurev1.Test_TEST_IPERF3_TCP {
			heavy = append(heavy, r)
		}
	}
	after := run.GetCreateTime().AsTime().Sub(t0)
	inTime := after <= d.cfg.Interval+d.jitter
	var hit *diagnose.Finding
	for _, f := range diagnose.Diagnose(heavy) {
		if f.Node == s.node && inTime {
			detected = true
			if f.Kind == s.kind {
				localised = true
				hit = &f
				continue
			}
		}
		others = append(others, f)
	}
	head = fmt.Sprintf("iperf3 run %s (started %4.1fs after the fault, %.1f run intervals; light probes do not see bandwidth)",
		run.GetRunId(), after.Seconds(), after.Seconds()/d.cfg.Interval.Seconds())
	if !inTime {
		head += " MORE THAN ONE INTERVAL"
	}
	if hit != nil {
		lines = append(lines, hit.String())
		if d.cfg.Verbose {
			for _, b := range hit.Bad {
				lines = append(lines, "  "+b)
			}
		}
	}
	return detected, localised, others, head, lines, nil
}
