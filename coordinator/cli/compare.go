package cli

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func newCompareCommand(o *options) *cobra.Command {
	var (
		failIfWorse float64
		by          string
	)
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B",
		Short: "Compare two runs cell by cell: change of the median and Welch's t-test at 95%",
		Long: `Match the cells of two runs (same node pair, path, test and parameters) and
print, for each, both medians, the change, Welch's t-test p-value and whether
the change is significant at 95% (each side needs 2 samples or more: use
--repeats). A run before and after a tuning, or two CNI modes.
--by path merges node pairs: per test and path, the samples are the pairs'
medians, so two runs without repeats still compare with significance.
With --fail-if-worse PCT the exit status is 1 if any cell is significantly
worse (throughput down, latency up) by more than PCT percent: a CI gate.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput("table", "json", "csv"); err != nil {
				return err
			}
			if by != "pair" && by != "path" {
				return fmt.Errorf("--by %q: want pair or path", by)
			}
			if failIfWorse < 0 || math.IsNaN(failIfWorse) {
				return fmt.Errorf("--fail-if-worse %v: want a percentage of 0 or more", failIfWorse)
			}
			runs, results, err := loadRuns(cmd.Context(), o, args[0], args[1])
			if err != nil {
				return err
			}
			runA, runB := runs[0], runs[1]
			cellsA, cellsB := testcell.Cells(results[0]), testcell.Cells(results[1])
			if by == "path" {
				cellsA, cellsB = testcell.ByPath(cellsA), testcell.ByPath(cellsB)
			}
			deltas := testcell.Compare(cellsA, cellsB)
			switch o.output {
			case "json":
				err = printDeltasJSON(o, deltas)
			case "csv":
				err = printDeltasCSV(o, deltas)
			default:
				printDeltas(o, runA, runB, deltas)
				if testcell.AnyIPv6(cellsA, cellsB) {
					// Side by side: each run's IPv6 against its IPv4.
					for _, r := range []struct {
						name  string
						run   *measurev1.Run
						cells []*testcell.Cell
					}{{"A", runA, cellsA}, {"B", runB, cellsB}} {
						printFamilyDeltas(o, fmt.Sprintf("IPv6 against IPv4 in run %s %s", r.name, labelOf(r.run)), testcell.CompareFamilies(r.cells))
					}
				}
			}
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("fail-if-worse") {
				var worse []string
				for _, d := range deltas {
					if d.WorseBy(failIfWorse) {
						worse = append(worse, deltaTitle(d))
					}
				}
				if len(worse) > 0 {
					fmt.Fprintf(o.stderr, "%d cell(s) significantly worse by more than %g%%: %s\n", len(worse), failIfWorse, strings.Join(worse, "; "))
					return &ExitError{Code: 1, Err: fmt.Errorf("%d cell(s) worse by more than %g%%", len(worse), failIfWorse)}
				}
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&failIfWorse, "fail-if-worse", 0, "exit 1 if a cell is significantly worse by more than this many percent")
	cmd.Flags().StringVar(&by, "by", "pair", "cells to compare: pair (each node pair; needs --repeats 2+) or path (node pairs as samples)")
	return cmd
}

// deltaTitle names d's cell on one line: "iperf3_tcp host-host node-1->node-2".
func deltaTitle(d testcell.Delta) string {
	return fmt.Sprintf("%s %s%s %s->%s", deltaTest(d), testspec.PathName(d.Key.Path), testcell.FamilySuffix(d.Key.Family), d.Key.Src, d.Key.Dst)
}

// printFamilyDeltas prints testcell.CompareFamilies' deltas under title:
// per test, path and pair, the IPv4 and the IPv6 medians side by side and
// the IPv6 overhead. Nothing without deltas.
func printFamilyDeltas(o *options, title string, deltas []testcell.Delta) {
	if len(deltas) == 0 {
		return
	}
	fmt.Fprintf(o.stdout, "\n%s (CHANGE is IPv6's median against IPv4's; WORSE: IPv6 significantly worse):\n", title)
	tw := newTable(o.stdout, "TEST\tPATH\tSRC\tDST\tIPV4 MEDIAN\tIPV6 MEDIAN\tCHANGE\tP\tVERDICT")
	for _, d := range deltas {
		med, change, p, verdict := deltaColumns(d)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", deltaTest(d), testspec.PathName(d.Key.Path), d.Key.Src, d.Key.Dst,
			med(d.A), med(d.B), change, p, verdict)
	}
	_ = tw.Flush()
}

// deltaTest is the test of d with its parameters' label.
func deltaTest(d testcell.Delta) string {
	if d.Label != "" {
		return testspec.Name(d.Key.Test) + " " + d.Label
	}
	return testspec.Name(d.Key.Test)
}

// deltaColumns are the columns of a delta's line: each side's median
// (with its sample count), the change, the p-value and the verdict.
func deltaColumns(d testcell.Delta) (med func(*testcell.Cell) string, change, p, verdict string) {
	med = func(c *testcell.Cell) string {
		if c == nil || len(c.Samples) == 0 {
			return "-"
		}
		return report.FormatHeadline(d.Key.Test, c.Stats.Median) + fmt.Sprintf(" (n=%d)", c.Stats.N)
	}
	change, p = "-", "-"
	if !math.IsNaN(d.MedianChange) {
		change = fmt.Sprintf("%+.1f%%", 100*d.MedianChange)
	}
	if d.Tested {
		p = fmt.Sprintf("%.3g", d.Test.P)
	}
	verdict = d.Verdict()
	if d.Tested && d.Worse {
		verdict = strings.ToUpper(verdict) // the table's eye-catcher
	}
	return med, change, p, verdict
}

func printDeltas(o *options, a, b *measurev1.Run, deltas []testcell.Delta) {
	fmt.Fprintf(o.stdout, "A: run %s %s\nB: run %s %s\n\n", a.GetRunId(), labelOf(a), b.GetRunId(), labelOf(b))
	tw := newTable(o.stdout, "")
	v6 := false
	for _, d := range deltas {
		v6 = v6 || d.Key.Family == measurev1.IPFamily_IP_FAMILY_IPV6
	}
	if v6 {
		fmt.Fprintln(tw, "TEST\tPATH\tFAMILY\tSRC\tDST\tA MEDIAN\tB MEDIAN\tCHANGE\tP\tVERDICT")
	} else {
		fmt.Fprintln(tw, "TEST\tPATH\tSRC\tDST\tA MEDIAN\tB MEDIAN\tCHANGE\tP\tVERDICT")
	}
	for _, d := range deltas {
		med, change, p, verdict := deltaColumns(d)
		path := testspec.PathName(d.Key.Path)
		if v6 {
			path += "\t" + protocol.FamilyName(d.Key.Family)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", deltaTest(d), path, d.Key.Src, d.Key.Dst,
			med(d.A), med(d.B), change, p, verdict)
	}
	_ = tw.Flush()
	worse, better := testcell.Tally(deltas)
	fmt.Fprintf(o.stdout, "\n%d cells: %d significantly worse, %d significantly better (Welch's t-test, 95%%)\n", len(deltas), worse, better)
}

func printDeltasJSON(o *options, deltas []testcell.Delta) error {
	type side struct {
		N      int      `json:"n"`
		Median *float64 `json:"median,omitempty"`
		Mean   *float64 `json:"mean,omitempty"`
	}
	type row struct {
		Test         string   `json:"test"`
		Params       string   `json:"params"`
		Path         string   `json:"path"`
		Src          string   `json:"src_node"`
		Dst          string   `json:"dst_node"`
		Family       string   `json:"ip_family,omitempty"` // set for IPv6; absent is IPv4
		Unit         string   `json:"unit"`
		A            *side    `json:"a"`
		B            *side    `json:"b"`
		MedianChange *float64 `json:"median_change_ratio,omitempty"`
		P            *float64 `json:"p_value,omitempty"`
		Significant  bool     `json:"significant"`
		Worse        bool     `json:"worse"`
		Better       bool     `json:"better"`
	}
	mk := func(c *testcell.Cell) *side {
		if c == nil {
			return nil
		}
		s := &side{N: c.Stats.N}
		if c.Stats.N > 0 {
			s.Median, s.Mean = &c.Stats.Median, &c.Stats.Mean
		}
		return s
	}
	rows := []row{}
	for _, d := range deltas {
		r := row{Test: testspec.Name(d.Key.Test), Params: d.Key.Params, Path: testspec.PathName(d.Key.Path), Src: d.Key.Src, Dst: d.Key.Dst,
			Unit: testcell.Unit(d.Key.Test), A: mk(d.A), B: mk(d.B), Significant: d.Tested && d.Test.Significant, Worse: d.Worse, Better: d.Better}
		if !math.IsNaN(d.MedianChange) {
			r.MedianChange = &d.MedianChange
		}
		if d.Tested {
			r.P = &d.Test.P
		}
		if d.Key.Family == measurev1.IPFamily_IP_FAMILY_IPV6 {
			r.Family = protocol.FamilyName(d.Key.Family)
		}
		rows = append(rows, r)
	}
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"cells": rows})
}

func printDeltasCSV(o *options, deltas []testcell.Delta) error {
	w := csv.NewWriter(o.stdout)
	_ = w.Write([]string{"test", "params", "path", "src_node", "dst_node", "unit", "a_n", "a_median", "b_n", "b_median", "median_change_ratio", "p_value", "significant", "verdict"})
	for _, d := range deltas {
		an, am, bn, bm := 0, "", 0, ""
		if d.A != nil {
			an, am = d.A.Stats.N, csvFloat(d.A.Stats.Median, d.A.Stats.N > 0)
		}
		if d.B != nil {
			bn, bm = d.B.Stats.N, csvFloat(d.B.Stats.Median, d.B.Stats.N > 0)
		}
		verdict := d.Verdict()
		_ = w.Write([]string{testspec.Name(d.Key.Test), d.Key.Params, testspec.PathName(d.Key.Path), d.Key.Src, d.Key.Dst, testcell.Unit(d.Key.Test),
			strconv.Itoa(an), am, strconv.Itoa(bn), bm, csvFloat(d.MedianChange, true), csvFloat(d.Test.P, d.Tested),
			strconv.FormatBool(d.Tested && d.Test.Significant), verdict})
	}
	w.Flush()
	return w.Error()
}
