package fleet

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// NewBenchScaleCommand is `meshlab bench-scale`: BenchScale for each case
// asked, one line per case.
func NewBenchScaleCommand() *cobra.Command {
	var (
		bin                      string
		nodes                    []int
		interval, report, window time.Duration
		plansOnly, gossip        bool
		onDemand                 bool
		meshRounds               uint32
		onDemandTest             string
		joinOver                 time.Duration
		kinds, paths             []string
		verbose                  bool
		pprofAddr                string
		streamsPerConn           int
	)
	cmd := &cobra.Command{
		Use:   "bench-scale",
		Short: "Measure the coordinator against a simulated fleet of agents on loopback (continuous probe plans and reports)",
		Long: `bench-scale runs a real coordinator process (BIN/coordinator) with a probes
config and connects, from this process, a simulated fleet of agents that speak
the real agent protocol over gRPC on loopback: each follows its probe plan and
reports plausible figures for every peer, path and kind once per report
interval. It prints one line per fleet size. No packet leaves loopback.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			test := measurev1.Test_TEST_PING
			if onDemandTest != "" {
				var err error
				if test, err = testspec.ParseTest(onDemandTest); err != nil {
					return fmt.Errorf("--on-demand-test: %w", err)
				}
			}
			for _, n := range nodes {
				work, err := os.MkdirTemp("", "meshperf-scale-")
				if err != nil {
					return err
				}
				res, err := BenchScale(cmd.Context(), ScaleConfig{
					Coordinator: filepath.Join(bin, "coordinator"), Nodes: n, Interval: interval, ReportInterval: report,
					Kinds: kinds, Paths: paths, PlansOnly: plansOnly, Gossip: gossip, OnDemand: onDemand, MeshRounds: meshRounds, OnDemandTest: test, JoinOver: joinOver, Window: window, Pprof: pprofAddr,
					StreamsPerConn: streamsPerConn, WorkDir: work, Logger: log,
				})
				if err != nil {
					return fmt.Errorf("nodes=%d: %w (coordinator files in %s)", n, err, work)
				}
				_ = os.RemoveAll(work)
				fmt.Fprintln(cmd.OutOrStdout(), res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&bin, "bin", "bin", "directory with the coordinator binary")
	f.IntSliceVar(&nodes, "nodes", []int{300}, "fleet sizes, one case each")
	f.DurationVar(&interval, "interval", 10*time.Second, "probe interval")
	f.DurationVar(&report, "report", 10*time.Second, "report interval (a multiple of --interval)")
	f.DurationVar(&window, "window", 0, "measuring window (0: two report intervals, at least 30s)")
	f.BoolVar(&plansOnly, "plans-only", false, "agents hold their plans and report nothing")
	f.BoolVar(&gossip, "gossip", true, "agents send whole gossip views at registration (the agents registered before) and every 10 minutes")
	f.BoolVar(&onDemand, "on-demand", false, "also trigger an on-demand mesh (host-host; --on-demand-test) and print the dispatch time per test")
	f.StringVar(&onDemandTest, "on-demand-test", "ping", "with --on-demand: the mesh's test, ping or a heavy one (iperf3_tcp: servers and clients in rounds)")
	f.Uint32Var(&meshRounds, "mesh-rounds", 0, "with --on-demand: that many rounds of the full mesh, every node in that many pairs (0: the full mesh, refused past 316 nodes)")
	f.DurationVar(&joinOver, "join-over", 0, "spread the registrations over this long")
	f.StringSliceVar(&kinds, "kinds", nil, "probe kinds (default icmp,tcp)")
	f.StringSliceVar(&paths, "paths", nil, "probe paths (default host-host,pod-pod)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log progress")
	f.IntVar(&streamsPerConn, "streams-per-conn", 1, "agents per gRPC connection (1: a connection each, as real agents)")
	f.StringVar(&pprofAddr, "pprof", "", "serve the coordinator's runtime profiles on this loopback address (e.g. 127.0.0.1:6061)")
	return cmd
}
