package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// RunEnded polls client's GetRun for run runID every interval until the
// run ended (testspec.RunEnded) and returns it; when ctx ends first, the
// error names the run, its last state and the last GetRun error.
func RunEnded(ctx context.Context, client meshv1.MeshServiceClient, runID string, interval time.Duration) (*measurev1.Run, error) {
	var (
		run  *measurev1.Run
		last error
	)
	err := Poll(ctx, interval, func() string {
		resp, err := client.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
		if err != nil {
			last = err
			return fmt.Sprintf("GetRun: %v", err)
		}
		run = resp.GetRun()
		if testspec.RunEnded(run.GetState()) {
			return ""
		}
		return "run " + runID + " " + testspec.RunStateName(run.GetState())
	})
	if err != nil {
		// The last GetRun error (if any) is context, not the cause.
		return nil, fmt.Errorf("run %s not ended (last state %v, last GetRun error %v): %w", runID, run.GetState(), last, err) //nolint:errorlint // see above
	}
	return run, nil
}

// WaitRunEnded is RunEnded within limit, failing t if the run did not end.
func WaitRunEnded(t testing.TB, ctx context.Context, client meshv1.MeshServiceClient, runID string, limit time.Duration) *measurev1.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	run, err := RunEnded(ctx, client, runID, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("after %v: %v", limit, err)
	}
	return run
}
