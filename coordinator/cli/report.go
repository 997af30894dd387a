package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// fetchRun reads a run and all its results.
func fetchRun(ctx context.Context, o *options, client meshv1.MeshServiceClient, runID string) (*measurev1.Run, []*measurev1.Result, error) {
	resp, err := bounded(ctx, o, "get run "+runID, func(ctx context.Context) (*meshv1.GetRunResponse, error) {
		return client.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
	})
	if err != nil {
		return nil, nil, err
	}
	results, _, err := listAll(ctx, o, client, &meshv1.ListResultsRequest{RunId: runID}, 0)
	if err != nil {
		return nil, nil, err
	}
	return resp.GetRun(), results, nil
}

// loadRuns dials the coordinator once and reads each run of runIDs with
// all its results, in the order of runIDs; the connection is closed
// when it returns.
func loadRuns(ctx context.Context, o *options, runIDs ...string) ([]*measurev1.Run, [][]*measurev1.Result, error) {
	client, closeConn, err := o.dial()
	if err != nil {
		return nil, nil, err
	}
	defer closeConn()
	runs, results := make([]*measurev1.Run, len(runIDs)), make([][]*measurev1.Result, len(runIDs))
	for i, id := range runIDs {
		if runs[i], results[i], err = fetchRun(ctx, o, client, id); err != nil {
			return nil, nil, err
		}
	}
	return runs, results, nil
}

func newReportCommand(o *options) *cobra.Command {
	var showCells bool
	cmd := &cobra.Command{
		Use:   "report RUN_ID",
		Short: "Per test and path, a node x node matrix of medians, the overhead against host->host, and a summary",
		Long: `Print, for every test (and parameters, e.g. a qperf message size) and path
of a run, a node x node matrix of the median of each pair's samples; then,
per path, its overhead against host->host on the same pairs (bandwidth
change in %, latency ratio), and a summary in words. --cells adds every
cell's statistics: n, median, mean, standard deviation, min, max, IQR and
the 95% confidence interval of the mean (Student t). Failed and busy
results are not samples; they are counted apart. -o json and -o csv print
the cells with their statistics in base units.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput("table", "json", "csv"); err != nil {
				return err
			}
			runs, results, err := loadRuns(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			run, cells := runs[0], testcell.Cells(results[0])
			switch o.output {
			case "json":
				return printCellsJSON(o, run, cells)
			case "csv":
				return printCellsCSV(o, cells)
			}
			printReport(o, run, cells, showCells)
			return nil
		},
	}
	cmd.Flags().BoolVar(&showCells, "cells", false, "also print every cell's statistics")
	return cmd
}

func printReport(o *options, run *measurev1.Run, cells []*testcell.Cell, showCells bool) {
	fmt.Fprintf(o.stdout, "run %s  %s  %s\n", run.GetRunId(), labelOf(run), testspec.RunStateName(run.GetState()))
	for _, m := range testcell.Matrices(cells) {
		fmt.Fprintf(o.stdout, "\n%s (median of each pair, %s)\n", m.Title(), testcell.Meaning(m.Test))
		tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "SRC \\ DST\t%s\t\n", strings.Join(m.Nodes, "\t"))
		for _, src := range m.Nodes {
			row := []string{src}
			for _, dst := range m.Nodes {
				row = append(row, matrixCell(m.Cells[src][dst]))
			}
			fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
		}
		_ = tw.Flush()
	}
	ovs := testcell.Overheads(cells)
	if len(ovs) > 0 {
		fmt.Fprintln(o.stdout, "\nagainst host->host on the same node pairs (median over pairs of median(path)/median(host-host)):")
		tw := newTable(o.stdout, "PATH\tTEST\tCHANGE\tPAIRS")
		for _, ov := range ovs {
			title := testspec.Name(ov.Test)
			if ov.Label != "" {
				title += " " + ov.Label
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", testspec.PathName(ov.Path)+testcell.FamilySuffix(ov.Family), title, ov.Words(), ov.Pairs)
		}
		_ = tw.Flush()
		if lines := testcell.Sentences(ovs, run.GetSpec().GetLabel()); len(lines) > 0 {
			fmt.Fprintf(o.stdout, "\nsummary:\n  %s\n", strings.Join(lines, "\n  "))
		}
	}
	if testcell.AnyIPv6(cells) {
		printFamilyDeltas(o, "IPv6 against IPv4 on the same paths", testcell.CompareFamilies(testcell.ByPath(cells)))
	}
	if showCells {
		fmt.Fprintln(o.stdout)
		printCellsTable(o, cells)
	}
}

func labelOf(run *measurev1.Run) string {
	if l := run.GetSpec().GetLabel(); l != "" {
		return "[" + l + "]"
	}
	return ""
}

// matrixCell is a cell's median, or what went wrong with it.
func matrixCell(c *testcell.Cell) string {
	switch {
	case c == nil:
		return "-"
	case len(c.Samples) == 0:
		return "failed"
	}
	v := report.FormatHeadline(c.Test, c.Stats.Median)
	if n := c.FailedCount(); n > 0 {
		v += fmt.Sprintf(" (%d failed)", n)
	}
	return v
}

func printCellsTable(o *options, cells []*testcell.Cell) {
	tw := newTable(o.stdout, "TEST\tPATH\tSRC\tDST\tN\tMEDIAN\tMEAN\tSTDDEV\tMIN\tMAX\tIQR\tCI95 LOW\tCI95 HIGH\tFAILED")
	for _, c := range cells {
		f := func(v float64) string { return report.FormatHeadline(c.Test, v) }
		row := []string{c.Title(), testspec.PathName(c.Path) + testcell.FamilySuffix(c.Family), c.Src, c.Dst, strconv.Itoa(c.Stats.N)}
		if c.Stats.N > 0 {
			row = append(row, f(c.Stats.Median), f(c.Stats.Mean), f(c.Stats.StdDev), f(c.Stats.Min), f(c.Stats.Max), f(c.Stats.IQR))
			if c.Stats.HasCI {
				row = append(row, f(c.Stats.CILow), f(c.Stats.CIHigh))
			} else {
				row = append(row, "-", "-")
			}
		} else {
			row = append(row, "-", "-", "-", "-", "-", "-", "-", "-")
		}
		row = append(row, failedText(c))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
}

func failedText(c *testcell.Cell) string {
	var parts []string
	for st, n := range c.Failed {
		parts = append(parts, fmt.Sprintf("%d %s", n, testspec.StatusName(st)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// cellJSON is a cell for -o json, in base units.
type cellJSON struct {
	Src       string         `json:"src_node"`
	Dst       string         `json:"dst_node"`
	Path      string         `json:"path"`
	Family    string         `json:"ip_family,omitempty"` // set for IPv6; absent is IPv4
	Test      string         `json:"test"`
	Params    string         `json:"params"`
	Unit      string         `json:"unit"`
	N         int            `json:"n"`
	Median    *float64       `json:"median,omitempty"`
	Mean      *float64       `json:"mean,omitempty"`
	StdDev    *float64       `json:"stddev,omitempty"`
	Min       *float64       `json:"min,omitempty"`
	Max       *float64       `json:"max,omitempty"`
	Q1        *float64       `json:"q1,omitempty"`
	Q3        *float64       `json:"q3,omitempty"`
	IQR       *float64       `json:"iqr,omitempty"`
	CI95Low   *float64       `json:"ci95_low,omitempty"`
	CI95High  *float64       `json:"ci95_high,omitempty"`
	Failed    map[string]int `json:"failed"`
	SampleSet []float64      `json:"samples"`
}

func toJSON(c *testcell.Cell) cellJSON {
	j := cellJSON{Src: c.Src, Dst: c.Dst, Path: testspec.PathName(c.Path), Test: testspec.Name(c.Test), Params: c.Params,
		Unit: testcell.Unit(c.Test), N: c.Stats.N, Failed: map[string]int{}, SampleSet: c.Samples}
	if c.Family == measurev1.IPFamily_IP_FAMILY_IPV6 {
		j.Family = protocol.FamilyName(c.Family)
	}
	for st, n := range c.Failed {
		j.Failed[testspec.StatusName(st)] = n
	}
	if c.Stats.N > 0 {
		s := c.Stats
		j.Median, j.Mean, j.StdDev, j.Min, j.Max, j.Q1, j.Q3, j.IQR = &s.Median, &s.Mean, &s.StdDev, &s.Min, &s.Max, &s.Q1, &s.Q3, &s.IQR
		if s.HasCI {
			j.CI95Low, j.CI95High = &s.CILow, &s.CIHigh
		}
	}
	return j
}

func printCellsJSON(o *options, run *measurev1.Run, cells []*testcell.Cell) error {
	out := struct {
		RunID     string            `json:"run_id"`
		Label     string            `json:"label"`
		Cells     []cellJSON        `json:"cells"`
		Overheads []json.RawMessage `json:"overheads"`
		Summary   []string          `json:"summary"`
	}{RunID: run.GetRunId(), Label: run.GetSpec().GetLabel(), Cells: []cellJSON{}, Overheads: []json.RawMessage{}}
	for _, c := range cells {
		out.Cells = append(out.Cells, toJSON(c))
	}
	ovs := testcell.Overheads(cells)
	for _, ov := range ovs {
		b, _ := json.Marshal(map[string]any{"path": testspec.PathName(ov.Path), "test": testspec.Name(ov.Test), "params": ov.Params,
			"ratio": ov.Ratio, "pairs": ov.Pairs})
		out.Overheads = append(out.Overheads, b)
	}
	out.Summary = testcell.Sentences(ovs, run.GetSpec().GetLabel())
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printCellsCSV(o *options, cells []*testcell.Cell) error {
	w := csv.NewWriter(o.stdout)
	_ = w.Write([]string{"test", "params", "path", "src_node", "dst_node", "unit", "n", "median", "mean", "stddev", "min", "max", "q1", "q3", "iqr", "ci95_low", "ci95_high", "failed"})
	for _, c := range cells {
		s, has := c.Stats, c.Stats.N > 0
		_ = w.Write([]string{testspec.Name(c.Test), c.Params, testspec.PathName(c.Path), c.Src, c.Dst, testcell.Unit(c.Test), strconv.Itoa(s.N),
			csvFloat(s.Median, has), csvFloat(s.Mean, has), csvFloat(s.StdDev, has), csvFloat(s.Min, has), csvFloat(s.Max, has), csvFloat(s.Q1, has), csvFloat(s.Q3, has),
			csvFloat(s.IQR, has), csvFloat(s.CILow, s.HasCI), csvFloat(s.CIHigh, s.HasCI), strconv.Itoa(c.FailedCount())})
	}
	w.Flush()
	return w.Error()
}
