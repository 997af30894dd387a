package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/agent/endpoint"
	"github.com/meshperf/meshperf/internal/version"
)

// endpointCmd is `agent endpoint`: the process of a node's endpoint pod.
func endpointCmd(stderr io.Writer) *cobra.Command {
	cfg := endpoint.ClientConfig{Hello: endpoint.Hello{Node: os.Getenv("NODE_NAME"), Version: version.Version}}
	cmd := &cobra.Command{
		Use:   "endpoint",
		Short: "run as a node's pod endpoint: connect to the node's agent over its unix socket and stay connected",
		Long: "Runs in the endpoint pod of a node. It connects to the agent's socket (a hostPath directory), " +
			"says hello (node name from $NODE_NAME, version), and holds the connection open: the agent takes this " +
			"pod's network namespace and IP from the connection. It reconnects with backoff if the agent restarts, " +
			"and exits cleanly on SIGTERM.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
			return endpoint.Dial(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.Socket, "socket", endpoint.DefaultSocket, "the agent's endpoint socket")
	return cmd
}
