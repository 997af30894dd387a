package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/chart"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
)

func newPlotCommand(o *options) *cobra.Command {
	var out, hmTest, hmPath string
	cmd := &cobra.Command{
		Use:   "plot RUN_ID --out FILE.png|FILE.svg",
		Short: "Draw latency and bandwidth against message size (a line per path) and a node x node heatmap",
		Long: `Draw a run's figures: qperf one-way latency and bandwidth against the
message size, one line per path (run a sweep: trigger --sweep), and a node x
node heatmap of one test on one path (default: the first bandwidth test on
pod-pod). The file's extension chooses PNG or SVG.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required: a .png or .svg file")
			}
			if o.output != "table" {
				return fmt.Errorf("--output %q: plot writes the --out file only; leave --output out", o.output)
			}
			opt := chart.Options{}
			var err error
			if hmTest != "" {
				if opt.HeatmapTest, err = testspec.ParseTest(hmTest); err != nil {
					return fmt.Errorf("--heatmap-test: %w", err)
				}
			}
			if hmPath != "" {
				if opt.HeatmapPath, err = testspec.ParsePath(hmPath); err != nil {
					return fmt.Errorf("--heatmap-path: %w", err)
				}
			}
			runs, results, err := loadRuns(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			opt.Title = "run " + runs[0].GetRunId() + " " + labelOf(runs[0])
			if err := chart.Render(testcell.Cells(results[0]), out, opt); err != nil {
				return err
			}
			fmt.Fprintf(o.stderr, "wrote %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "output file: .png or .svg")
	f.StringVar(&hmTest, "heatmap-test", "", "test of the heatmap (default: the first bandwidth test)")
	f.StringVar(&hmPath, "heatmap-path", "", "path of the heatmap (default: pod-pod)")
	return cmd
}
