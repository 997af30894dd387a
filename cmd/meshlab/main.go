// Command meshlab builds, inspects and removes the network-namespace lab
// that meshperf runs on without Kubernetes (see package deploy/lab), and runs
// the demo: the full mesh on that lab (see package deploy/lab/cluster).
package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/deploy/fleet"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	"github.com/meshperf/meshperf/deploy/lab/labcli"
	"github.com/meshperf/meshperf/internal/grpcbuf"
	"github.com/meshperf/meshperf/internal/signals"
)

// init sizes gRPC's message buffers to the messages (internal/grpcbuf):
// bench-scale's simulated fleet takes thousands of full plans at once.
func init() { grpcbuf.Install() }

func main() {
	err := signals.Execute(context.Background(), NewCommand(os.Stdout, os.Stderr), os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrDemoFailed), errors.Is(err, cluster.ErrFaultsMissed):
		os.Exit(1) // the verdict line was the last word
	default:
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Error("meshlab failed", "err", err)
		os.Exit(1)
	}
}

// NewCommand returns meshlab's command tree: the lab's commands
// (deploy/lab/labcli: up, down, status, fault) with demo, demo-faults,
// bench and bench-scale, writing output to stdout and errors to stderr.
// The tree also feeds the generated reference docs/cli/meshlab.md
// (internal/clidoc).
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := labcli.NewCommand(cluster.NewDemoCommand(), cluster.NewFaultsCommand(), cluster.NewBenchCommand(), fleet.NewBenchScaleCommand())
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd
}
