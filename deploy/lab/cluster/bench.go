package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/deploy/lab"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// RoundsResult is what BenchRounds measured.
type RoundsResult struct {
	// Rounds is how many rounds the coordinator laid the mesh out in.
	Rounds int
	// Optimal is the fewest rounds possible (schedule.OptimalRounds).
	Optimal int
	// Wall is the run's wall time, from its creation to its end.
	Wall time.Duration
	// PerTest is the mean wall time of one test's client.
	PerTest time.Duration
	// Failed counts tests that did not end OK.
	Failed int
}

// Ratio is Wall / (Optimal x PerTest): 1.0 means the mesh took exactly as
// long as its rounds' tests, back to back.
func (r RoundsResult) Ratio() float64 {
	return r.Wall.Seconds() / (float64(r.Optimal) * r.PerTest.Seconds())
}

// String is the benchmark's one line.
func (r RoundsResult) String() string {
	return fmt.Sprintf("rounds=%d optimal=%d wall_s=%.2f per_test_s=%.3f ratio=%.3f", r.Rounds, r.Optimal, r.Wall.Seconds(), r.PerTest.Seconds(), r.Ratio())
}

// BenchRounds brings a lab up, runs a full iperf3 TCP mesh on host->host
// (every ordered pair once, duration each) and measures how close the
// schedule comes to the optimum.
func BenchRounds(ctx context.Context, labCfg lab.Config, binDir string, duration time.Duration) (RoundsResult, error) {
	l, err := lab.Up(ctx, labCfg)
	if err != nil {
		return RoundsResult{}, fmt.Errorf("lab up: %w", err)
	}
	defer func() { _ = lab.Down(context.WithoutCancel(ctx), labCfg.Prefix, nil) }()
	work, err := os.MkdirTemp("", "meshperf-bench-")
	if err != nil {
		return RoundsResult{}, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	c, err := New(Config{Lab: l, BinDir: binDir, WorkDir: work, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return RoundsResult{}, err
	}
	defer func() { _ = c.Stop() }()
	if err := c.Start(ctx); err != nil {
		return RoundsResult{}, err
	}
	client, conn, err := c.Dial()
	if err != nil {
		return RoundsResult{}, err
	}
	defer func() { _ = conn.Close() }()
	resp, err := client.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Label: "bench-rounds",
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_IPERF3_TCP, Params: &measurev1.TestSpec_Iperf3{
			Iperf3: &measurev1.Iperf3Params{Duration: durationpb.New(duration)}}}},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
	}})
	if err != nil {
		return RoundsResult{}, fmt.Errorf("trigger: %w", err)
	}
	runID := resp.GetRun().GetRunId()
	stream, err := client.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: runID})
	if err != nil {
		return RoundsResult{}, fmt.Errorf("watch: %w", err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return RoundsResult{}, fmt.Errorf("watch: %w", err)
		}
	}
	got, err := client.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
	if err != nil {
		return RoundsResult{}, err
	}
	run := got.GetRun()
	results, err := RunResults(ctx, client, runID)
	if err != nil {
		return RoundsResult{}, err
	}
	r := RoundsResult{
		Rounds: int(run.GetRounds()), Optimal: schedule.OptimalRounds(len(l.Nodes)),
		Wall: run.GetEndTime().AsTime().Sub(run.GetCreateTime().AsTime()), Failed: int(run.GetTestsFailed()),
	}
	var sum time.Duration
	for _, res := range results {
		sum += res.GetElapsed().AsDuration()
	}
	if n := len(results); n > 0 {
		r.PerTest = sum / time.Duration(n)
	}
	if r.PerTest == 0 {
		return r, errors.New("no result carries an elapsed time")
	}
	return r, nil
}

// NewBenchCommand returns `meshlab bench-rounds`.
func NewBenchCommand() *cobra.Command {
	var (
		nodes    int
		prefix   string
		binDir   string
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench-rounds",
		Short: "Measure the heavy-test schedule: a full iperf3 mesh on a lab, against the optimal rounds",
		Long: `Bring up a lab, run a full iperf3 TCP mesh on host->host and print one line:
rounds=R optimal=O wall_s=W per_test_s=T ratio=X, where ratio = W / (O x T).
R == O means the schedule uses the fewest rounds possible; a ratio near 1
means little time is lost between tests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := BenchRounds(cmd.Context(), lab.Config{Prefix: prefix, Nodes: nodes}, binDir, duration)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			if r.Failed > 0 {
				return fmt.Errorf("%d test(s) failed; the timing is not meaningful", r.Failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", 6, "lab nodes")
	f.StringVar(&prefix, "prefix", "mpbench", "network namespace name prefix")
	f.StringVar(&binDir, "bin", "bin", "directory with the agent and coordinator binaries")
	f.DurationVar(&duration, "duration", 2*time.Second, "iperf3 time per test, whole seconds")
	return cmd
}
