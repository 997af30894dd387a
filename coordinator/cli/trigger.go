package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/meshperf/meshperf/internal/signals"
	"github.com/meshperf/meshperf/internal/syncio"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func newTriggerCommand(o *options) *cobra.Command {
	var tf triggerFlags
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "Start a run, show its progress, and print a table per node pair and path",
		Long: `Start a run (by default the full mesh of every ordered node pair, on the
paths host-host, host-pod, pod-pod and pod-service, with ping, qperf tcp_lat
and tcp_bw, iperf3 TCP and HTTP), print its run ID, show progress while it
runs, then print one row per node pair and path. Ping and HTTP run first;
then the heavy tests (qperf, iperf3, http_load) in rounds in which no node is in two
of them. With --external NAME[,NAME], every node of the run also pings
(and fetches the http_url of) those targets of the coordinator's allowlist
from its host and pod networks, and runs iperf3 and qperf to those with
the ports of such a server (coordinator targets lists them), one client at
a time per target (a busy server is retried, never a sample); an iperf3
or qperf test named in --tests that no target has a server for is refused. The last line reads "N/N pair-paths OK"; the exit status is 1
if any pair-path failed or is missing. Then: coordinator report RUN_ID,
compare RUN_A RUN_B, plot RUN_ID --out run.png.

Ctrl-C while it watches does what --on-interrupt says: ask (once, on the
terminal: "cancel run X? [y/N]"), cancel (the run's running tests stop,
the tests not started are dropped, what it measured is kept, and trigger
watches it end canceled), or detach (the run goes on; exit status 130).
The default asks when stdin is a terminal and detaches otherwise. A second
Ctrl-C stops watching at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := tf.spec()
			if err != nil {
				return err
			}
			policy, err := interruptPolicy(tf.onInterrupt, isTerminal(o.stdin))
			if err != nil {
				return err
			}
			return runTrigger(cmd.Context(), o, spec, tf.noWait, policy)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&tf.tests, "tests", nil, "tests, comma-separated: "+strings.Join(testspec.TestNames(), ", ")+
		" (default "+strings.Join(testspec.NamesOf(testspec.DefaultTests()), ",")+")")
	f.StringSliceVar(&tf.paths, "paths", nil, "paths, comma-separated: "+strings.Join(testspec.PathNames(), ", ")+
		" (default "+strings.Join(testspec.PathNamesOf(testspec.DefaultPaths()), ",")+", and with --external also host-external,pod-external)")
	f.StringSliceVar(&tf.external, "external", nil,
		"external targets of the coordinator's allowlist (listed by coordinator targets), comma-separated: measured with ping and HTTP from every node of the run, and iperf3 and qperf to those with server ports")
	f.StringSliceVar(&tf.pairs, "pair", nil, "node pair SRC:DST, repeatable (default: every ordered pair of known nodes)")
	f.Uint32Var(&tf.repeats, "repeats", 0, "samples per test, 2 or more give spread and confidence intervals (default: 3 for ping, 5 for http, 1 for qperf and iperf3)")
	f.Uint32Var(&tf.meshRounds, "mesh-rounds", 0, "without --pair: measure this many rounds of the full mesh, not all of its 2(n-1): in a round every node is in one pair, so a run of k rounds measures every node k times and takes k rounds of heavy tests, whatever the number of nodes (default: the full mesh)")
	f.Uint32Var(&tf.firstMeshRound, "first-mesh-round", 0, "with --mesh-rounds: the first round measured, 0-based (modulo the mesh's rounds)")
	f.DurationVar(&tf.duration, "duration", 0, "qperf and iperf3 measuring time, whole seconds (default 2s)")
	f.Uint32Var(&tf.pingCount, "ping-count", 0, "echo requests per ping test (default 5)")
	f.StringSliceVar(&tf.msgSizes, "msg-sizes", nil, "qperf message sizes, comma-separated: bytes or with K/M (1024-based), e.g. 64,1K,64K")
	f.BoolVar(&tf.sweep, "sweep", false, "qperf message sizes 64 B to 64 KiB, doubling (the field's sweep)")
	f.StringSliceVar(&tf.streams, "streams", nil, "iperf3 parallel streams, comma-separated: one test per value, e.g. 1,2,4 (default 1)")
	f.StringSliceVar(&tf.blockSizes, "block-sizes", nil, "iperf3 block sizes (-l), comma-separated, e.g. 8K,128K: one test per value")
	f.Uint32Var(&tf.loadRequests, "requests", 0, "http_load: requests per ab run (default 1000, at most 1,000,000)")
	f.Uint32Var(&tf.loadConcurrency, "concurrency", 0, "http_load: requests in flight (default 10, at most 1000 and at most --requests)")
	f.BoolVar(&tf.keepAlive, "keep-alive", false, "http_load: reuse connections (ab -k, HTTP/1.0 keep-alive)")
	f.DurationVar(&tf.loadTimeout, "load-timeout", 0, "http_load: time limit of the whole load, whole seconds 1s..300s; requests not done by then are failures (default 30s)")
	f.Uint32Var(&tf.maxHeavy, "max-heavy", 0, "at most this many qperf/iperf3 tests at once across the fabric (default: one per node pair of a round)")
	f.StringVar(&tf.label, "label", "", "a name for the run, e.g. the CNI mode or the change tried (shown by report and compare; not monitor-..., the continuous monitor's)")
	f.StringVar(&tf.ipFamily, "ip-family", "", "IP families to measure each node pair and path in: ipv4, ipv6 or dual (default: every family both nodes of a pair have)")
	f.BoolVar(&tf.noWait, "no-wait", false, "print the run ID and return at once")
	f.StringVar(&tf.onInterrupt, "on-interrupt", "", "what Ctrl-C while watching does: ask (whether to cancel the run), cancel, or detach (the run goes on) (default: ask when stdin is a terminal, else detach)")
	return cmd
}

func runTrigger(ctx context.Context, o *options, spec *measurev1.RunSpec, noWait bool, policy string) error {
	if err := o.checkOutput(); err != nil {
		return err
	}
	return withClient(o, func(client meshv1.MeshServiceClient) error {
		resp, err := bounded(ctx, o, "trigger run", func(ctx context.Context) (*meshv1.TriggerRunResponse, error) {
			return client.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: spec})
		})
		if err != nil {
			return err
		}
		run := resp.GetRun()
		fmt.Fprintln(o.stderr, plannedLine(run))
		warnDisconnected(ctx, o, client, run)
		if noWait {
			fmt.Fprintln(o.stdout, run.GetRunId())
			return nil
		}
		interrupts, release := signals.Claim(ctx)
		defer release()
		f := &follower{o: o, client: client, run: run, policy: policy, interrupts: interrupts, answers: o.stdin}
		if err := f.follow(ctx); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(o.stderr, "stopped watching; run %s goes on in the coordinator: see `coordinator results --run %s`\n", run.GetRunId(), run.GetRunId())
			}
			return err
		}
		return printRun(ctx, o, client, run.GetRunId())
	})

}

// plannedLine is trigger's first line: the run's ID, its planned tests
// and, for a run of some of the mesh's rounds, which.
func plannedLine(run *measurev1.Run) string {
	line := fmt.Sprintf("run %s: %d test(s) planned", run.GetRunId(), len(run.GetPlanned()))
	if k, n := run.GetMeshRounds(), run.GetMeshRoundCount(); k < n {
		line += fmt.Sprintf(": %d of the mesh's %d rounds, from round %d", k, n, run.GetSpec().GetFirstMeshRound()%n)
	}
	return line
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
		for _, n := range testspec.DestOf(pt).Nodes(pt.GetSrcNode()) { // a target is no node
			inRun[n] = true
		}
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
	tty := w
	if lw, ok := w.(*syncio.Writer); ok { // follow's stderr
		tty = lw.Unwrap()
	}
	if f, ok := tty.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
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
