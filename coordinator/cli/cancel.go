package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func newCancelCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a run: its tests not started are dropped, its running tests stopped; what it measured is kept",
		Long: `Cancel a queued or running run (a continuous run's current round too; the
next round starts as usual). Its tests not started are dropped, its
running tests are stopped on both agents, and the run ends "canceled" with
the results of the tests that ended before kept; the others read
"canceled". Prints the run's state: "running" for the moment its running
tests take to stop (see coordinator runs). A run that already ended is
left as it is.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			resp, err := unary(cmd.Context(), o, "cancel run "+args[0], func(ctx context.Context, c meshv1.MeshServiceClient) (*meshv1.CancelRunResponse, error) {
				return c.CancelRun(ctx, &meshv1.CancelRunRequest{RunId: args[0]})
			})
			if err != nil {
				return err
			}
			return o.printLine(resp, cancelLine(resp.GetRun()))
		},
	}
}

// cancelLine says where a run is after CancelRun.
func cancelLine(run *measurev1.Run) string {
	id, state := run.GetRunId(), testspec.RunStateName(run.GetState())
	switch run.GetState() {
	case measurev1.RunState_RUN_STATE_QUEUED, measurev1.RunState_RUN_STATE_RUNNING:
		return fmt.Sprintf("run %s: canceling (%s, %d/%d tests done; its running tests are stopping)", id, state, run.GetTestsDone(), run.GetTestsPlanned())
	case measurev1.RunState_RUN_STATE_CANCELED:
		return fmt.Sprintf("run %s: %s (%s), %d/%d tests done", id, state, run.GetMessage(), run.GetTestsDone(), run.GetTestsPlanned())
	}
	return fmt.Sprintf("run %s already ended: %s, left as it is", id, state)
}
