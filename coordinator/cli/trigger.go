package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// triggerFlags are `coordinator trigger`'s own flags.
type triggerFlags struct {
	tests, paths, pairs []string
	repeats             uint32
	duration            time.Duration
	pingCount           uint32
	msgSizes            []string
	streams             uint32
	noWait              bool
}

func newTriggerCommand(o *options) *cobra.Command {
	var tf triggerFlags
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "Start a run, show its progress, and print a table per node pair and path",
		Long: `Start a run on the connected agents (by default the full mesh of every
ordered node pair, on the paths host-host, host-pod, pod-pod and pod-service,
with ping, qperf tcp_lat and tcp_bw, iperf3 TCP and HTTP), print its run ID,
show progress while it runs, then print one row per node pair and path.
The last line reads "N/N pair-paths OK"; the exit status is 1 if any
pair-path failed or is missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := tf.spec()
			if err != nil {
				return err
			}
			return runTrigger(cmd.Context(), o, spec, tf.noWait)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&tf.tests, "tests", nil, "tests, comma-separated: "+strings.Join(testNames(), ", ")+" (default ping,qperf_tcp_lat,qperf_tcp_bw,iperf3_tcp,http)")
	f.StringSliceVar(&tf.paths, "paths", nil, "paths, comma-separated: "+strings.Join(pathNames(), ", ")+" (default host-host,host-pod,pod-pod,pod-service)")
	f.StringSliceVar(&tf.pairs, "pair", nil, "node pair SRC:DST, repeatable (default: every ordered pair of connected nodes)")
	f.Uint32Var(&tf.repeats, "repeats", 1, "samples per test")
	f.DurationVar(&tf.duration, "duration", 0, "qperf and iperf3 measuring time, whole seconds (default 2s)")
	f.Uint32Var(&tf.pingCount, "ping-count", 0, "echo requests per ping test (default 5)")
	f.StringSliceVar(&tf.msgSizes, "msg-sizes", nil, "qperf message sizes in bytes, comma-separated, e.g. 64,1024,65536")
	f.Uint32Var(&tf.streams, "streams", 0, "iperf3 parallel streams (default 1)")
	f.BoolVar(&tf.noWait, "no-wait", false, "print the run ID and return at once")
	return cmd
}

// spec turns the flags into a RunSpec; the coordinator validates the values.
func (tf *triggerFlags) spec() (*measurev1.RunSpec, error) {
	spec := &measurev1.RunSpec{Repeats: tf.repeats}
	names := splitList(tf.tests)
	if len(names) == 0 {
		for _, t := range []measurev1.Test{
			measurev1.Test_TEST_PING, measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_TCP_BW,
			measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_HTTP,
		} {
			names = append(names, testspec.Name(t))
		}
	}
	if err := tf.checkParamsApply(names); err != nil {
		return nil, err
	}
	var sizes []uint64
	for _, s := range splitList(tf.msgSizes) {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--msg-sizes: %q is not a byte count", s)
		}
		sizes = append(sizes, n)
	}
	var dur *durationpb.Duration
	if tf.duration != 0 {
		dur = durationpb.New(tf.duration)
	}
	for _, name := range names {
		t, err := testspec.ParseTest(name)
		if err != nil {
			return nil, fmt.Errorf("--tests: %w", err)
		}
		ts := &measurev1.TestSpec{Test: t}
		switch testspec.Tool(t) {
		case measurev1.Tool_TOOL_PING:
			if tf.pingCount != 0 {
				ts.Params = &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: tf.pingCount}}
			}
		case measurev1.Tool_TOOL_QPERF:
			if dur != nil || len(sizes) > 0 {
				ts.Params = &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: dur, MsgSizeBytes: sizes}}
			}
		case measurev1.Tool_TOOL_IPERF3:
			if dur != nil || tf.streams != 0 {
				ts.Params = &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: dur, ParallelStreams: tf.streams}}
			}
		}
		spec.Tests = append(spec.Tests, ts)
	}
	for _, name := range splitList(tf.paths) {
		p, err := testspec.ParsePath(name)
		if err != nil {
			return nil, fmt.Errorf("--paths: %w", err)
		}
		spec.Paths = append(spec.Paths, p)
	}
	for _, s := range tf.pairs {
		src, dst, ok := strings.Cut(s, ":")
		if !ok || src == "" || dst == "" {
			return nil, fmt.Errorf("--pair %q: want SRC:DST", s)
		}
		spec.Pairs = append(spec.Pairs, &measurev1.NodePair{SrcNode: src, DstNode: dst})
	}
	return spec, nil
}

// checkParamsApply refuses a parameter flag that no chosen test uses, so
// that nothing is silently ignored.
func (tf *triggerFlags) checkParamsApply(names []string) error {
	uses := map[measurev1.Tool]bool{}
	for _, name := range names {
		if t, err := testspec.ParseTest(name); err == nil {
			uses[testspec.Tool(t)] = true
		}
	}
	for _, f := range []struct {
		flag  string
		set   bool
		tools []measurev1.Tool
	}{
		{"--msg-sizes", len(tf.msgSizes) > 0, []measurev1.Tool{measurev1.Tool_TOOL_QPERF}},
		{"--duration", tf.duration != 0, []measurev1.Tool{measurev1.Tool_TOOL_QPERF, measurev1.Tool_TOOL_IPERF3}},
		{"--streams", tf.streams != 0, []measurev1.Tool{measurev1.Tool_TOOL_IPERF3}},
		{"--ping-count", tf.pingCount != 0, []measurev1.Tool{measurev1.Tool_TOOL_PING}},
	} {
		if !f.set {
			continue
		}
		used := false
		for _, t := range f.tools {
			used = used || uses[t]
		}
		if !used {
			return fmt.Errorf("%s is set but no chosen test uses it (tests: %s)", f.flag, strings.Join(names, ","))
		}
	}
	if tf.duration%time.Second != 0 {
		return fmt.Errorf("--duration %v: qperf and iperf3 take whole seconds", tf.duration)
	}
	return nil
}

func runTrigger(ctx context.Context, o *options, spec *measurev1.RunSpec, noWait bool) error {
	client, closeConn, err := o.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	callCtx, cancel := o.call(ctx)
	resp, err := client.TriggerRun(callCtx, &meshv1.TriggerRunRequest{Spec: spec})
	cancel()
	if err != nil {
		return fmt.Errorf("trigger run: %w", err)
	}
	run := resp.GetRun()
	fmt.Fprintf(o.stderr, "run %s: %d test(s) planned\n", run.GetRunId(), len(run.GetPlanned()))
	warnDisconnected(ctx, o, client, run)
	if noWait {
		fmt.Fprintln(o.stdout, run.GetRunId())
		return nil
	}
	if err := watch(ctx, o, client, run); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(o.stderr, "stopped watching; run %s goes on in the coordinator: see `coordinator results --run %s`\n", run.GetRunId(), run.GetRunId())
		}
		return err
	}
	return printRun(ctx, o, client, run.GetRunId())
}

// warnDisconnected tells which nodes of the run have no connected agent:
// their tests will fail as agent_unavailable.
func warnDisconnected(ctx context.Context, o *options, client meshv1.MeshServiceClient, run *measurev1.Run) {
	callCtx, cancel := o.call(ctx)
	defer cancel()
	resp, err := client.ListAgents(callCtx, &meshv1.ListAgentsRequest{})
	if err != nil {
		return // the run goes on; the results will say what failed
	}
	inRun := map[string]bool{}
	for _, pt := range run.GetPlanned() {
		inRun[pt.GetSrcNode()], inRun[pt.GetDstNode()] = true, true
	}
	for _, a := range resp.GetAgents() {
		if inRun[a.GetNodeName()] && !a.GetConnected() {
			fmt.Fprintf(o.stderr, "warning: node %s has no connected agent (last seen %s): its tests will fail as agent_unavailable\n",
				a.GetNodeName(), a.GetLastSeenTime().AsTime().Local().Format(time.DateTime))
		}
	}
}

// watch follows the run until it ends, drawing progress on stderr.
func watch(ctx context.Context, o *options, client meshv1.MeshServiceClient, run *measurev1.Run) error {
	stream, err := client.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: run.GetRunId()})
	if err != nil {
		return fmt.Errorf("watch run: %w", err)
	}
	p := newProgress(o.stderr, len(run.GetPlanned()))
	defer p.finish()
	for {
		u, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch run %s: %w", run.GetRunId(), err)
		}
		p.update(u.GetRun())
	}
}

// progress shows a bar on a terminal, and a line every tenth of the run
// otherwise (logs, CI).
type progress struct {
	w     io.Writer
	total int
	bar   *progressbar.ProgressBar
	last  int
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total, last: -1}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("tests"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progress) update(run *measurev1.Run) {
	done := int(run.GetTestsDone())
	if p.bar != nil {
		_ = p.bar.Set(done)
		p.bar.Describe(fmt.Sprintf("tests (%d failed)", run.GetTestsFailed()))
		return
	}
	if step := done * 10 / max(p.total, 1); step != p.last {
		p.last = step
		fmt.Fprintf(p.w, "progress: %d/%d tests done, %d failed\n", done, p.total, run.GetTestsFailed())
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
