package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/tick"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// FaultsConfig configures DemoFaults.
type FaultsConfig struct {
	// Lab is the lab to build; Prefix defaults to "mpfaults", Nodes to 3
	// (localising needs 3 or more), Mode to host-gw.
	Lab lab.Config
	// BinDir holds the agent and coordinator binaries.
	BinDir string
	// Interval is the continuous iperf3 mesh's interval, at least 5 s;
	// zero means 30 s, the coordinator's default. Each tick is jittered by
	// up to a tenth of it. The agents probe (and report) every sixth of
	// it, at least every second.
	Interval time.Duration
	// Scenarios are the names of the scenarios to run (see FaultScenarios);
	// empty means all. The clean run always comes first.
	Scenarios []string
	// Verbose prints every bad pair-path-test of each finding, not one,
	// and every report period the probe judge found a bad summary in.
	Verbose bool
	// Stdout receives the verdict of each scenario and the last line;
	// Stderr the progress.
	Stdout, Stderr io.Writer
}

// FaultScenarios names the scenarios of DemoFaults, in their order: each
// faults one node (the coordinator for "coordinator-killed").
var FaultScenarios = []string{"pod-drop", "mtu-blackhole", "rate-limit", "icmp-drop", "agent-killed", "coordinator-killed"}

// labFaultScenarios are the scenarios of FaultScenarios that inject a
// lab fault (lab.Inject, lab.Clear) into their node: the fault and the
// finding the diagnosis must come to.
var labFaultScenarios = map[string]struct {
	fault   lab.FaultKind
	finding diagnose.Kind
}{
	"pod-drop":      {lab.FaultPodDrop, diagnose.KindPodNetwork},
	"mtu-blackhole": {lab.FaultMTUBlackhole, diagnose.KindMTU},
	"rate-limit":    {lab.FaultRateLimit, diagnose.KindSlow},
	"icmp-drop":     {lab.FaultICMPDrop, diagnose.KindICMP},
}

// FaultsResult is what DemoFaults found.
type FaultsResult struct {
	// Faults is how many faults were injected (F).
	Faults int
	// Detected is how many of them the agents' reports showed in time (D).
	Detected int
	// Localised is how many were pinned on the right node with the right
	// kind in time (L).
	Localised int
	// FalseAlarms counts the faults judged on a node without one, or of
	// another kind on the faulty node, in the clean stretch and beside the
	// injected faults, and those still held once a fault was cleared (A);
	// see DemoFaults.
	FalseAlarms int
}

// String is the verdict line, "faults detected D/F, localised L/F, false
// alarms A".
func (r FaultsResult) String() string {
	return fmt.Sprintf("faults detected %d/%d, localised %d/%d, false alarms %d", r.Detected, r.Faults, r.Localised, r.Faults, r.FalseAlarms)
}

// OK reports D == F, L == F and A == 0.
func (r FaultsResult) OK() bool {
	return r.Detected == r.Faults && r.Localised == r.Faults && r.FalseAlarms == 0
}

// ErrFaultsMissed means a fault went undetected or unlocalised, or a node
// was blamed wrongly; the scenario lines say which.
var ErrFaultsMissed = errors.New("faults missed or false alarms")

// monitorConfig is the coordinator's config for the demo: the agents'
// continuous probes (ICMP, full-size ICMP with DF set, TCP connect and
// HTTP over host-host and pod-pod, every probe interval, reported as
// often), whose reports the coordinator's probe judge localises faults
// from, and a continuous iperf3 mesh over the same paths every run
// interval: the heavy test that a bandwidth fault needs.
const monitorConfig = `monitor:
  light:
    interval: %s
    jitter: %s
    tests: [iperf3_tcp]
    paths: [host-host, pod-pod]
    duration: 1s
probes:
  interval: %s
  report_interval: %s
  kinds: [icmp, icmp_mtu, tcp, http]
  paths: [host-host, pod-pod]
`

// probeInterval is the probes' interval in the demo: a sixth of the
// runs' interval, at least a second.
func (d *faultsDemo) probeInterval() time.Duration {
	return max(time.Second, (d.cfg.Interval / 6).Truncate(time.Second))
}

// faultScenario is one fault and what meshperf should say of it.
type faultScenario struct {
	name string
	// node is the node at fault; "" for the clean run.
	node string
	// kind is the finding wanted for node.
	kind diagnose.Kind
	// inject and clear put the fault in place and take it away.
	inject, clear func(ctx context.Context) error
}

// DemoFaults runs the fault scenarios on a lab under the coordinator's
// continuous monitoring: a clean stretch first, then, one after the
// other, each scenario's fault on one node (see FaultScenarios). The
// verdicts come from the agents' reports as the coordinator judges them:
//
//   - A fault the light probes can see (pod-drop, mtu-blackhole,
//     icmp-drop, agent-killed) is judged from the coordinator's probe
//     judge (coordinator/probes.go, diagnose.ProbeJudge), which judges
//     each report period once its reports are in. Agents' periods end on
//     the wall clock's multiples of the probe interval I; a fault
//     injected at t is in the whole of the period that holds t+I (the
//     fault's first full period, or, when t is a period's start, the
//     period holding t). The fault is detected when the judge names its
//     node in that period or an earlier one after t ("probe fault
//     localised" with the period), and localised when it names the
//     expected kind too. The demo prints how long after t the judge said
//     so, in seconds and in probe intervals: at most 2 I plus the wait
//     for the period's last reports (1 s, the probe timeout, 1 s).
//   - rate-limit, a bandwidth fault no light probe sees, is judged from
//     the iperf3 results of the first continuous iperf3 mesh run after
//     the fault (the agents report them as every run's), which must start
//     within one run interval plus jitter, diagnosed as `coordinator
//     diagnose` does; the coordinator's own log must say the same.
//   - Killing the coordinator mid-run counts as detected when the run it
//     cut ends interrupted, and as localised when every test it left
//     without results says so, every agent report period around the kill
//     is stored once (none lost, none twice), and the first run after the
//     restart blames no node.
//
// A false alarm is any other node, or another kind on the faulty node,
// that the probe judge localises from the fault until a whole period
// after it was cleared (or, in the clean stretch, during one run
// interval), any fault it still holds then, and any other finding of the
// iperf3 run judged. The last line of Stdout is FaultsResult.String; the
// error is ErrFaultsMissed unless FaultsResult.OK.
func DemoFaults(ctx context.Context, cfg FaultsConfig) (FaultsResult, error) {
	if cfg.Lab.Prefix == "" {
		cfg.Lab.Prefix = "mpfaults"
	}
	if cfg.Lab.Nodes == 0 {
		cfg.Lab.Nodes = 3
	}
	if cfg.Lab.Nodes < 3 {
		return FaultsResult{}, fmt.Errorf("faults demo: %d nodes: localising a fault needs 3 or more", cfg.Lab.Nodes)
	}
	if cfg.Interval == 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Interval < 5*time.Second {
		return FaultsResult{}, fmt.Errorf("faults demo: interval %v: want at least 5s", cfg.Interval)
	}
	for _, s := range cfg.Scenarios {
		if !slices.Contains(FaultScenarios, s) {
			return FaultsResult{}, fmt.Errorf("faults demo: scenario %q: want one of %s", s, strings.Join(FaultScenarios, ", "))
		}
	}
	// A lab config that lab.Up would refuse fails here, before the work
	// directory is made (it was left behind, "logs kept" with no logs).
	if _, err := lab.Describe(cfg.Lab); err != nil {
		return FaultsResult{}, fmt.Errorf("faults demo: %w", err)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	work, err := os.MkdirTemp("", "meshperf-faults-")
	if err != nil {
		return FaultsResult{}, err
	}
	d := &faultsDemo{cfg: cfg, jitter: cfg.Interval / 10}
	res, err := d.run(ctx, work)
	if err != nil {
		d.say("logs kept in %s", filepath.Join(work, "logs"))
		return res, err
	}
	fmt.Fprintln(cfg.Stdout, res)
	if !res.OK() {
		d.say("logs kept in %s", filepath.Join(work, "logs"))
		return res, ErrFaultsMissed
	}
	_ = os.RemoveAll(work)
	return res, nil
}

// faultsDemo is one DemoFaults' state.
type faultsDemo struct {
	cfg    FaultsConfig
	jitter time.Duration
	l      *lab.Lab
	c      *Cluster
	client meshv1.MeshServiceClient
}

func (d *faultsDemo) say(format string, args ...any) {
	fmt.Fprintf(d.cfg.Stderr, "==> "+format+"\n", args...)
}

func (d *faultsDemo) run(ctx context.Context, work string) (res FaultsResult, err error) {
	cleanupCtx := context.WithoutCancel(ctx)
	labCfg := d.cfg.Lab
	if d.l, err = lab.Up(ctx, labCfg); err != nil {
		return res, fmt.Errorf("lab up: %w", err)
	}
	d.say("lab %s: %d nodes, %s (network namespaces only; nothing leaves this machine)", d.l.Prefix, len(d.l.Nodes), d.l.Mode)
	defer func() {
		d.say("lab %s down", d.l.Prefix)
		if derr := lab.Down(cleanupCtx, labCfg.Prefix, nil); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab down: %w", derr))
		}
	}()
	conf := filepath.Join(work, "coordinator.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, monitorConfig, d.cfg.Interval, d.jitter, d.probeInterval(), d.probeInterval()), 0o600); err != nil {
		return res, err
	}
	d.c, err = New(Config{Lab: d.l, BinDir: d.cfg.BinDir, WorkDir: work, CoordinatorArgs: []string{"--config", conf, "--log-level", "debug"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := d.c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = d.c.Start(startCtx)
	cancel()
	if err != nil {
		return res, err
	}
	client, conn, err := d.c.Dial()
	if err != nil {
		return res, err
	}
	defer func() { _ = conn.Close() }()
	d.client = client
	d.say("coordinator serve --config: the agents probe ICMP, full-size ICMP, TCP and HTTP over host-host and pod-pod every %v and report as often; iperf3 mesh every %v (jitter %v)",
		d.probeInterval(), d.cfg.Interval, d.jitter)

	for _, s := range d.scenarios() {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if s.name == "coordinator-killed" {
			detected, localised, alarms, err := d.coordinatorKilled(ctx)
			if err != nil {
				return res, err
			}
			res.Faults++
			res.Detected += b2i(detected)
			res.Localised += b2i(localised)
			res.FalseAlarms += alarms
			continue
		}
		detected, localised, alarms, err := d.scenario(ctx, s)
		if err != nil {
			return res, err
		}
		if s.node != "" {
			res.Faults++
			res.Detected += b2i(detected)
			res.Localised += b2i(localised)
		}
		res.FalseAlarms += alarms
	}
	return res, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scenarios are the clean run and the chosen scenarios. Faults go to
// node-2 and node-3 in turn: node-1 runs the coordinator.
func (d *faultsDemo) scenarios() []faultScenario {
	labFault := func(kind lab.FaultKind, node string) (inject, remove func(context.Context) error) {
		return func(ctx context.Context) error { return lab.Inject(ctx, d.l, lab.Fault{Kind: kind, Node: node}) },
			func(ctx context.Context) error {
				_, err := lab.Clear(ctx, d.l, node, kind)
				return err
			}
	}
	nop := func(context.Context) error { return nil }
	all := []faultScenario{{name: "clean", inject: nop, clear: nop}}
	for i, name := range FaultScenarios {
		if len(d.cfg.Scenarios) > 0 && !slices.Contains(d.cfg.Scenarios, name) {
			continue
		}
		node := fmt.Sprintf("node-%d", 2+i%(len(d.l.Nodes)-1))
		s := faultScenario{name: name, node: node}
		if lf, ok := labFaultScenarios[name]; ok {
			s.kind = lf.finding
			s.inject, s.clear = labFault(lf.fault, node)
		}
		switch name {
		case "agent-killed":
			s.kind = diagnose.KindAgentGone
			s.inject = func(context.Context) error { return d.c.StopAgent(node, syscall.SIGKILL) }
			s.clear = func(ctx context.Context) error {
				if err := d.c.StartAgent(node); err != nil {
					return err
				}
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				return d.c.WaitAgents(wctx, len(d.l.Nodes))
			}
		case "coordinator-killed":
			s.node = "coordinator"
		}
		all = append(all, s)
	}
	return all
}

// scenario runs one fault: idle mesh, inject, the verdict, clear, quiet.
// A fault the light probes can see is judged from the coordinator's probe
// judge (judgeScenario); rate-limit, a bandwidth fault no light probe
// sees, from the next iperf3 mesh run (bandwidthScenario).
func (d *faultsDemo) scenario(ctx context.Context, s faultScenario) (detected, localised bool, alarms int, err error) {
	if err := d.waitIdle(ctx); err != nil {
		return false, false, 0, err
	}
	what := "no fault (the false-alarm baseline)"
	if s.node != "" {
		what = fmt.Sprintf("%s on %s", s.name, s.node)
	}
	d.say("scenario %s: %s", s.name, what)
	if err := s.inject(ctx); err != nil {
		return false, false, 0, fmt.Errorf("scenario %s: inject: %w", s.name, err)
	}
	// The fault holds whole once inject has returned: its rules go in one
	// by one, which takes a while on a loaded machine, and a period that
	// began before the last of them is not one the fault holds whole.
	t0 := time.Now()
	cleared := false
	undo := func() error {
		if cleared {
			return nil
		}
		cleared = true
		if err := s.clear(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("scenario %s: clear: %w", s.name, err)
		}
		return nil
	}
	defer func() { err = errors.Join(err, undo()) }()
	var runFindings []diagnose.Finding
	var runHead string
	var runLines []string
	if s.kind == diagnose.KindSlow {
		if detected, localised, runFindings, runHead, runLines, err = d.bandwidthScenario(ctx, s, t0); err != nil {
			return false, false, 0, err
		}
		alarms = len(runFindings)
	}
	// The light probes' verdict: for a light fault, the first period that
	// holds the fault whole (or an earlier one) must name it.
	deadline := d.probeDeadline(t0)
	if s.node == "" {
		deadline = t0.Add(d.cfg.Interval) // the clean stretch: a run's interval
	}
	if _, err := d.waitJudged(ctx, t0, deadline); err != nil {
		return false, false, 0, fmt.Errorf("scenario %s: %w", s.name, err)
	}
	if err := undo(); err != nil {
		return false, false, 0, err
	}
	quiet, evs, err := d.waitQuiet(ctx, t0, time.Now())
	if err != nil {
		return false, false, 0, err
	}
	v := judgeScenario(evs, s, t0, deadline, quiet)
	alarms += len(v.alarms)
	if s.node != "" && s.kind != diagnose.KindSlow {
		detected, localised = v.hit.msg != "", v.localised
	}
	var verdict string
	switch {
	case s.node == "" && alarms == 0:
		verdict = "OK: no alarm"
	case s.node == "":
		verdict = fmt.Sprintf("FALSE ALARM x%d", alarms)
	case localised:
		verdict = fmt.Sprintf("OK: %s on %s", s.kind, s.node)
	case detected:
		verdict = fmt.Sprintf("DETECTED, NOT LOCALISED (want %s on %s)", s.kind, s.node)
	default:
		verdict = fmt.Sprintf("MISSED (want %s on %s by the period ending %s)", s.kind, s.node, deadline.Format(time.TimeOnly))
	}
	if s.node != "" && alarms > 0 {
		verdict += fmt.Sprintf(", FALSE ALARM x%d", alarms)
	}
	i := d.probeInterval()
	switch {
	case s.kind == diagnose.KindSlow:
		fmt.Fprintf(d.cfg.Stdout, "%-20s %s: %s\n", s.name, runHead, verdict)
		for _, l := range runLines {
			fmt.Fprintf(d.cfg.Stdout, "    %s\n", l)
		}
	case v.hit.msg != "":
		after := v.hit.at.Sub(t0)
		fmt.Fprintf(d.cfg.Stdout, "%-20s probes: period %s-%s judged %4.1fs after the fault (%.1f intervals of %v; %.1fs after the period): %s\n",
			s.name, v.hit.start.Format(time.TimeOnly), v.hit.end.Format(time.TimeOnly), after.Seconds(), after.Seconds()/i.Seconds(), i,
			v.hit.at.Sub(v.hit.end).Seconds(), verdict)
	default:
		fmt.Fprintf(d.cfg.Stdout, "%-20s probes: %s\n", s.name, verdict)
	}
	if v.hit.msg != "" {
		_, eg, _ := strings.Cut(v.hit.line, " e.g.=\"")
		eg, _, _ = strings.Cut(eg, "; ")
		fmt.Fprintf(d.cfg.Stdout, "    node %s: %s (judged on its %s summaries; e.g. %s)\n", v.hit.node, v.hit.kind, logField(v.hit.line, "of"), strings.TrimSuffix(eg, `"`))
	}
	for _, a := range v.alarms {
		fmt.Fprintf(d.cfg.Stdout, "    false alarm: probes: %s\n", a)
	}
	for _, f := range runFindings {
		fmt.Fprintf(d.cfg.Stdout, "    false alarm: run: %s\n", f)
	}
	if d.cfg.Verbose {
		for _, e := range evs {
			if e.msg == diagnose.LogPeriodJudged && !strings.Contains(e.line, " bad=0 ") {
				fmt.Fprintf(d.cfg.Stdout, "      %s\n", e.line)
			}
		}
	}
	return detected, localised, alarms, nil
}

// coordinatorKilled kills the coordinator with SIGKILL while a continuous
// run is half done, restarts it on the same store, and checks that the
// run ends interrupted with a reason for every test left without results,
// and that the next run blames no node.
func (d *faultsDemo) coordinatorKilled(ctx context.Context) (detected, localised bool, alarms int, err error) {
	if err := d.waitIdle(ctx); err != nil {
		return false, false, 0, err
	}
	d.say("scenario coordinator-killed: SIGKILL the coordinator mid-run, restart it on the same store")
	// The report check below looks at the three probe intervals before the
	// kill: every agent must have reported through them, also one that the
	// previous scenario (agent-killed) has just restarted.
	if err := tick.Sleep(ctx, 4*d.probeInterval()); err != nil {
		return false, false, 0, err
	}
	t0 := time.Now()
	run, err := d.waitRunning(ctx, t0)
	if err != nil {
		return false, false, 0, fmt.Errorf("scenario coordinator-killed: %w", err)
	}
	killed := time.Now()
	if err := d.c.StopCoordinator(syscall.SIGKILL); err != nil {
		return false, false, 0, err
	}
	// Clients still running finish meanwhile; their agents keep the results.
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
		return false, false, 0, ctx.Err()
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.c.StartCoordinator(startCtx); err != nil {
		return false, false, 0, err
	}
	restarted := time.Now()
	if err := d.c.WaitAgents(startCtx, len(d.l.Nodes)); err != nil {
		return false, false, 0, err
	}
	got, err := d.client.GetRun(ctx, &meshv1.GetRunRequest{RunId: run.GetRunId()})
	if err != nil {
		return false, false, 0, fmt.Errorf("scenario coordinator-killed: %w", err)
	}
	detected = got.GetRun().GetState() == measurev1.RunState_RUN_STATE_INTERRUPTED
	results, err := d.results(ctx, run.GetRunId())
	if err != nil {
		return false, false, 0, err
	}
	tests := map[string]bool{}
	explained := true
	for _, r := range results {
		tests[r.GetTestId()] = true
		if r.GetStatus() == measurev1.Status_STATUS_INTERRUPTED && !strings.Contains(r.GetMessage(), "coordinator") {
			explained = false
		}
	}
	complete := len(tests) == len(got.GetRun().GetPlanned())
	fmt.Fprintf(d.cfg.Stdout, "%-20s run %s: %s after the restart, %d/%d tests with results\n", "coordinator-killed",
		run.GetRunId(), testspec.RunStateName(got.GetRun().GetState()), len(tests), len(got.GetRun().GetPlanned()))
	// The agents are fine: the next run must say so.
	next, findings, err := d.nextRun(ctx, time.Now())
	if err != nil {
		return false, false, 0, fmt.Errorf("scenario coordinator-killed: %w", err)
	}
	alarms = len(findings)
	// The agents kept probing and spooled their reports while the
	// coordinator was down: every period from before the kill to the
	// restart must be stored, and none of those reported since twice.
	i := d.probeInterval()
	kept, keptOK, err := d.reportsKept(ctx, killed.Add(-3*i).Truncate(i), restarted.Truncate(i), time.Now().Add(-d.judgeGrace()-i).Truncate(i))
	if err != nil {
		return false, false, 0, fmt.Errorf("scenario coordinator-killed: %w", err)
	}
	localised = detected && explained && complete && keptOK && alarms == 0
	verdict := "OK: the run ended interrupted, every test accounted for, the next run is clean"
	switch {
	case !detected:
		verdict = "MISSED: the run did not end interrupted"
	case !explained || !complete:
		verdict = "NOT LOCALISED: tests without results or without a reason"
	case !keptOK:
		verdict = "NOT LOCALISED: probe reports lost or stored twice"
	case alarms > 0:
		verdict = fmt.Sprintf("FALSE ALARM x%d in the next run %s", alarms, next.GetRunId())
	}
	fmt.Fprintf(d.cfg.Stdout, "%-20s %s\n", "", verdict)
	fmt.Fprintf(d.cfg.Stdout, "%-20s probe reports: %s\n", "", kept)
	for _, f := range findings {
		fmt.Fprintf(d.cfg.Stdout, "    %s\n", f)
	}
	return detected, localised, alarms, nil
}

// NewFaultsCommand returns `meshlab demo-faults`.
func NewFaultsCommand() *cobra.Command {
	var cfg FaultsConfig
	cmd := &cobra.Command{
		Use:   "demo-faults",
		Short: "Inject each fault scenario into a lab under continuous monitoring; check it is detected and localised",
		Long: `Bring a 3-node lab up, run the coordinator with the agents' continuous
probes (ICMP, full-size ICMP, TCP and HTTP over host-host and pod-pod every
sixth of --interval) and a continuous iperf3 mesh every --interval, and an
agent per node. After a clean stretch (the false-alarm baseline), inject one
fault at a time into node-2 or node-3: pod-drop, mtu-blackhole, rate-limit
(tc tbf), icmp-drop, agent-killed (SIGKILL), then SIGKILL the coordinator
mid-run. For each light fault, the coordinator's judgment of the agents'
probe reports must name the faulty node and the kind of fault by the report
period that holds the fault's time plus one probe interval; for rate-limit,
the diagnosis of the next iperf3 run, within one --interval; the
coordinator kill must lose no report. The last line reads
"faults detected D/F, localised L/F, false alarms A"; the exit status is 0
only if D == F, L == F and A == 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Stdout, cfg.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			_, err := DemoFaults(cmd.Context(), cfg)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Lab.Prefix, "prefix", "mpfaults", "network namespace name prefix of the lab")
	f.IntVar(&cfg.Lab.Nodes, "nodes", 3, fmt.Sprintf("number of nodes, 3..%d", lab.MaxNodes))
	f.StringVar(&cfg.BinDir, "bin", "bin", "directory with the agent and coordinator binaries")
	f.DurationVar(&cfg.Interval, "interval", 30*time.Second, "interval of the continuous mesh (at least 5s)")
	f.BoolVarP(&cfg.Verbose, "verbose", "v", false, "print every bad pair-path-test of each finding")
	f.StringSliceVar(&cfg.Scenarios, "scenarios", nil, "scenarios to run (default all): "+strings.Join(FaultScenarios, ", "))
	return cmd
}
