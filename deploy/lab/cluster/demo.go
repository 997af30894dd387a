package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/forward"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// DemoConfig configures Demo.
type DemoConfig struct {
	// Lab is the lab to build; its Prefix defaults to "mpdemo" and its Mode
	// is set from Modes.
	Lab lab.Config
	// Modes are the CNI modes to measure one after the other, on the same
	// node names and into the same store; empty means host-gw then vxlan.
	Modes []lab.Mode
	// BinDir holds the agent and coordinator binaries.
	BinDir string
	// TriggerArgs are extra arguments for `coordinator trigger`.
	TriggerArgs []string
	// Stdout and Stderr receive the demo's output.
	Stdout, Stderr io.Writer
	// UIListen is the root namespace's loopback address on which the
	// coordinator's web UI is reachable while a mode runs (forwarded into
	// the control-plane node, deploy/lab/forward); empty means
	// 127.0.0.1:0, a free port.
	UIListen string
	// KeepUI keeps the last mode's lab, coordinator and web UI up after
	// the verdict until ctx ends (Ctrl-C).
	KeepUI bool
}

// DemoWebPort is the coordinator's web UI port inside the control-plane
// node's host namespace, on its loopback.
const DemoWebPort = 8080

// demoProbes is the continuous probing of the demo's config: what the web
// UI's mesh page shows, live, while a mode runs.
const demoProbes = `probes:
  interval: 10s
  report_interval: 10s
  kinds: [icmp, tcp]
  paths: [host-host, pod-pod, pod-service]
`

// ErrDemoFailed means the mesh ran but a pair-path failed or is missing;
// the report says which.
var ErrDemoFailed = errors.New("some pair-paths failed")

// Demo is the main job on a machine without a cluster. For each mode it
// brings a lab up, starts the coordinator and an agent per node in it
// (one store for all modes), triggers the full mesh with `coordinator
// trigger` (whose table it prints) labelled with the mode, and tears the
// lab down, also when ctx is canceled. While a mode runs, the coordinator's
// web UI (with a live mesh of the continuous probes) is forwarded to
// cfg.UIListen. With two modes or more it prints `coordinator compare --by
// path` between the first and the last. It ends with the verdict over every
// run, "N/N pair-paths OK" (or how many failed), and the web UI's address,
// kept up until ctx ends with cfg.KeepUI; it returns ErrDemoFailed if any
// pair-path failed.
func Demo(ctx context.Context, cfg DemoConfig) error {
	if cfg.Lab.Prefix == "" {
		cfg.Lab.Prefix = "mpdemo"
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = []lab.Mode{lab.ModeHostGW, lab.ModeVXLAN}
	}
	work, err := os.MkdirTemp("", "meshperf-demo-")
	if err != nil {
		return err
	}
	d := &demo{cfg: cfg, work: work}
	var runs []string
	for i, mode := range cfg.Modes {
		runID, err := d.mode(ctx, mode, i == len(cfg.Modes)-1, runs)
		if err != nil {
			d.say("logs kept in %s", filepath.Join(work, "logs"))
			return err
		}
		runs = append(runs, runID)
	}
	_ = os.RemoveAll(work)
	if d.ok != d.total {
		return ErrDemoFailed
	}
	return nil
}

// finish prints the verdict over every run, "N/N pair-paths OK" (or how
// many failed), then the web UI's address; with KeepUI it then waits
// until ctx ends.
func (d *demo) finish(ctx context.Context, ui string) {
	fmt.Fprintln(d.cfg.Stdout, report.VerdictLine(d.ok, d.total))
	if !d.cfg.KeepUI {
		fmt.Fprintf(d.cfg.Stdout, "web UI: http://%s/ (closed with the lab; make demo UI=1 keeps it up until Ctrl-C)\n", ui)
		return
	}
	fmt.Fprintf(d.cfg.Stdout, "web UI: http://%s/ (up until Ctrl-C)\n", ui)
	<-ctx.Done()
}

// demo is one Demo's state across modes.
type demo struct {
	cfg       DemoConfig
	work      string
	ok, total int
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.cfg.Stderr, "==> "+format+"\n", args...)
}

// mode measures one CNI mode and returns its run ID; on the last mode it
// also compares the first run with this one.
func (d *demo) mode(ctx context.Context, mode lab.Mode, last bool, earlier []string) (runID string, err error) {
	cleanupCtx := context.WithoutCancel(ctx)
	labCfg := d.cfg.Lab
	labCfg.Mode = mode
	l, err := lab.Up(ctx, labCfg)
	if err != nil {
		return "", fmt.Errorf("lab up: %w", err)
	}
	family := "" // the default, IPv4, reads as before families
	if l.IPFamily != lab.FamilyIPv4 {
		family = ", " + string(l.IPFamily)
	}
	d.say("lab %s: %d nodes, %s%s (network namespaces only; nothing leaves this machine)", l.Prefix, len(l.Nodes), l.Mode, family)
	defer func() {
		d.say("lab %s (%s) down", l.Prefix, l.Mode)
		if derr := lab.Down(cleanupCtx, labCfg.Prefix, nil); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab down: %w", derr))
		}
	}()
	conf := filepath.Join(d.work, "meshperf.yaml")
	if err := os.WriteFile(conf, []byte(ExternalConfig(l, demoProbes)), 0o600); err != nil {
		return "", err
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	served, err := ServeExternal(srvCtx, l)
	if err != nil {
		stopSrv()
		return "", err
	}
	defer func() {
		stopSrv()
		if serr := <-served; serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	d.say("external host %s outside the cluster, allowlisted as external target %s (ping, HTTP %s)", l.External.IP, ExternalTargetName, ExternalURL(l))
	web := net.JoinHostPort("127.0.0.1", strconv.Itoa(DemoWebPort))
	c, err := New(Config{Lab: l, BinDir: d.cfg.BinDir, WorkDir: d.work, CoordinatorArgs: []string{"--config", conf, "--web-listen", web},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", err
	}
	defer func() {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	d.say("coordinator on %s (socket %s), agents on %d nodes", c.CoordinatorAddress(), c.SocketPath(), len(l.Nodes))
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = c.Start(startCtx)
	cancel()
	if err != nil {
		return "", err
	}
	fwd, err := forward.Start(ctx, forward.Config{NetNS: l.ControlPlane().HostNetNSPath, Target: web, Listen: d.cfg.UIListen})
	if err != nil {
		return "", fmt.Errorf("web UI: %w", err)
	}
	defer func() { _ = fwd.Close() }()
	d.say("web UI on http://%s/ while %s runs (the coordinator's %s in node %s, forwarded to this machine's loopback)", fwd.Addr(), mode, web, l.ControlPlane().Name)
	d.say("coordinator trigger --label %s --external %s (full mesh: every ordered node pair, paths host-host host-pod pod-pod pod-service; and every node to %s from host and pod)",
		mode, ExternalTargetName, ExternalTargetName)
	args := append([]string{"trigger", "--label", string(mode), "--external", ExternalTargetName}, d.cfg.TriggerArgs...)
	if err := d.cli(ctx, c, args...); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			return "", fmt.Errorf("coordinator trigger: %w", err)
		}
	}
	runID, ok, total, err := d.verdict(ctx, c)
	if err != nil {
		return "", err
	}
	d.ok, d.total = d.ok+ok, d.total+total
	if last && len(earlier) > 0 {
		d.say("coordinator compare %s %s --by path (%s against %s; node pairs are the samples)", earlier[0], runID, mode, d.cfg.Modes[0])
		if err := d.cli(ctx, c, "compare", earlier[0], runID, "--by", "path"); err != nil {
			return "", fmt.Errorf("coordinator compare: %w", err)
		}
	}
	if last {
		d.finish(ctx, fwd.Addr())
	}
	return runID, nil
}

// cli runs the coordinator CLI against c's socket, printing to the demo's
// output.
func (d *demo) cli(ctx context.Context, c *Cluster, args ...string) error {
	args = append([]string{"--coordinator", "unix://" + c.SocketPath()}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.BinDir, "coordinator"), args...)
	cmd.Stdout, cmd.Stderr = d.cfg.Stdout, d.cfg.Stderr
	return cmd.Run()
}

// verdict reads the newest run and counts its pair-paths.
func (d *demo) verdict(ctx context.Context, c *Cluster) (runID string, ok, total int, err error) {
	client, conn, err := c.Dial()
	if err != nil {
		return "", 0, 0, err
	}
	defer func() { _ = conn.Close() }()
	runs, err := client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 1})
	if err != nil || len(runs.GetRuns()) == 0 {
		return "", 0, 0, fmt.Errorf("find the run: %v", err) //nolint:errorlint // err is nil when the list is empty
	}
	runID = runs.GetRuns()[0].GetRunId()
	full, err := client.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
	if err != nil {
		return "", 0, 0, err
	}
	results, err := RunResults(ctx, client, runID)
	if err != nil {
		return "", 0, 0, err
	}
	ok, total = report.Summary(report.Build(full.GetRun(), results))
	return runID, ok, total, nil
}

// NewDemoCommand returns `meshlab demo`.
func NewDemoCommand() *cobra.Command {
	var (
		cfg    DemoConfig
		modes  []string
		family string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Full mesh on a local lab per CNI mode, then a comparison: up, trigger, print, down",
		Long: `For each CNI mode (default host-gw, then vxlan): bring a lab up, run the
coordinator in node 1 and an agent on every node, trigger the full mesh
(ping, qperf tcp_lat and tcp_bw, iperf3 TCP, HTTP over host->host,
host->pod, pod->pod and pod->service for every ordered node pair) plus ping
and HTTP from every node's host and pod to the lab's external host (an
allowlisted external target outside the cluster), print the table, and
tear the lab down. Then compare the modes with coordinator
compare --by path. While a mode runs, the coordinator's web UI is
forwarded to --ui-listen on this machine's loopback. The verdict line reads
"N/N pair-paths OK" over every run, and the last line gives the web UI's
address (--keep-ui keeps it up until Ctrl-C); the exit status is 1 if any
pair-path failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, m := range modes {
				cfg.Modes = append(cfg.Modes, lab.Mode(m))
			}
			cfg.Lab.IPFamily = lab.Family(family)
			cfg.Stdout, cfg.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return Demo(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Lab.Prefix, "prefix", "mpdemo", "network namespace name prefix of the demo lab")
	f.IntVar(&cfg.Lab.Nodes, "nodes", lab.DefaultNodes, fmt.Sprintf("number of nodes, %d..%d", lab.MinNodes, lab.MaxNodes))
	f.StringSliceVar(&modes, "modes", []string{string(lab.ModeHostGW), string(lab.ModeVXLAN)}, "CNI modes to measure in turn: host-gw, vxlan")
	f.BoolVar(&cfg.Lab.DropCrossNodePod, "drop-cross-node-pod", false, "break cross-node pod traffic (iptables DROP), as a CNI with missing routes")
	f.StringVar(&family, "ip-family", string(lab.FamilyIPv4), "IP stack of the lab's hosts, pods and ClusterIPs: ipv4, ipv6 or dual (dual measures every pair-path in both families)")
	f.StringVar(&cfg.BinDir, "bin", "bin", "directory with the agent and coordinator binaries")
	f.StringVar(&cfg.UIListen, "ui-listen", "127.0.0.1:0", "loopback address of this machine on which the lab coordinator's web UI is forwarded (port 0: a free one)")
	f.BoolVar(&cfg.KeepUI, "keep-ui", false, "after the verdict, keep the last mode's lab and the web UI up until Ctrl-C")
	f.StringSliceVar(&cfg.TriggerArgs, "trigger-arg", nil, "extra argument for coordinator trigger (repeatable), e.g. --trigger-arg=--duration=1s")
	return cmd
}
