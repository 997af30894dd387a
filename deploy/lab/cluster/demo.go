package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/deploy/lab"
)

// DemoConfig configures Demo.
type DemoConfig struct {
	// Lab is the lab to build; its Prefix defaults to "mpdemo".
	Lab lab.Config
	// BinDir holds the agent and coordinator binaries.
	BinDir string
	// TriggerArgs are extra arguments for `coordinator trigger`.
	TriggerArgs []string
	// Stdout and Stderr receive the demo's output.
	Stdout, Stderr io.Writer
}

// ErrDemoFailed means the mesh ran but a pair-path failed or is missing;
// the report says which.
var ErrDemoFailed = errors.New("some pair-paths failed")

// Demo is the main job on a machine without a cluster: it brings a lab up,
// starts the coordinator and an agent per node in it, triggers the full
// mesh with `coordinator trigger` (whose report it prints), tears
// everything down, also when ctx is canceled, and prints trigger's verdict
// ("N/N pair-paths OK") again as its very last line. It returns
// ErrDemoFailed if the verdict is not all OK.
func Demo(ctx context.Context, cfg DemoConfig) error {
	last := &lastLine{w: cfg.Stdout}
	cfg.Stdout = last
	err := demo(ctx, cfg)
	if v := last.String(); v != "" {
		fmt.Fprintln(last.w, v)
	}
	return err
}

// lastLine passes writes through and remembers the last complete line.
type lastLine struct {
	w       io.Writer
	partial []byte
	last    string
}

func (l *lastLine) Write(b []byte) (int, error) {
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.partial[:i])); line != "" {
			l.last = line
		}
		l.partial = l.partial[i+1:]
	}
	return l.w.Write(b)
}

func (l *lastLine) String() string { return l.last }

func demo(ctx context.Context, cfg DemoConfig) (err error) {
	if cfg.Lab.Prefix == "" {
		cfg.Lab.Prefix = "mpdemo"
	}
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Stderr, "==> "+format+"\n", args...) }
	cleanupCtx := context.WithoutCancel(ctx)

	l, err := lab.Up(ctx, cfg.Lab)
	if err != nil {
		return fmt.Errorf("lab up: %w", err)
	}
	say("lab %s: %d nodes, %s (network namespaces only; nothing leaves this machine)", l.Prefix, len(l.Nodes), l.Mode)
	defer func() {
		say("lab down")
		if derr := lab.Down(cleanupCtx, cfg.Lab.Prefix, nil); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab down: %w", derr))
		}
	}()
	work, err := os.MkdirTemp("", "meshperf-demo-")
	if err != nil {
		return err
	}
	c, err := New(Config{Lab: l, BinDir: cfg.BinDir, WorkDir: work, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer func() {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		if err == nil {
			_ = os.RemoveAll(work)
		} else {
			say("logs kept in %s", filepath.Join(work, "logs"))
		}
	}()
	say("coordinator on %s (socket %s), agents on %d nodes", c.CoordinatorAddress(), c.SocketPath(), len(l.Nodes))
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = c.Start(startCtx)
	cancel()
	if err != nil {
		return err
	}
	say("coordinator trigger (full mesh: every ordered node pair, paths host-host host-pod pod-pod pod-service)")
	args := append([]string{"--coordinator", "unix://" + c.SocketPath(), "trigger"}, cfg.TriggerArgs...)
	cmd := exec.CommandContext(ctx, filepath.Join(cfg.BinDir, "coordinator"), args...)
	cmd.Stdout, cmd.Stderr = cfg.Stdout, cfg.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			return ErrDemoFailed
		}
		return fmt.Errorf("coordinator trigger: %w", err)
	}
	return nil
}

// NewDemoCommand returns `meshlab demo`.
func NewDemoCommand() *cobra.Command {
	var (
		cfg  DemoConfig
		mode string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Full mesh on a local lab: up, start coordinator and agents, trigger, print, down",
		Long: `Bring a lab up, run the coordinator in node 1 and an agent on every node,
trigger the full mesh (ping, qperf tcp_lat and tcp_bw, iperf3 TCP, HTTP over
host->host, host->pod, pod->pod and pod->service for every ordered node
pair), print the report, and tear the lab down. The last line reads
"N/N pair-paths OK"; the exit status is 1 if any pair-path failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Lab.Mode = lab.Mode(mode)
			cfg.Stdout, cfg.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return Demo(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Lab.Prefix, "prefix", "mpdemo", "network namespace name prefix of the demo lab")
	f.IntVar(&cfg.Lab.Nodes, "nodes", lab.DefaultNodes, fmt.Sprintf("number of nodes, %d..%d", lab.MinNodes, lab.MaxNodes))
	f.StringVar(&mode, "mode", string(lab.ModeHostGW), "cross-node pod network: host-gw or vxlan")
	f.BoolVar(&cfg.Lab.DropCrossNodePod, "drop-cross-node-pod", false, "break cross-node pod traffic (iptables DROP), as a CNI with missing routes")
	f.StringVar(&cfg.BinDir, "bin", "bin", "directory with the agent and coordinator binaries")
	f.StringSliceVar(&cfg.TriggerArgs, "trigger-arg", nil, "extra argument for coordinator trigger (repeatable), e.g. --trigger-arg=--duration=1s")
	return cmd
}
