package cli

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// printRun prints a finished run: a row per pair and path, failures, and the
// verdict line last. It returns an *ExitError if a pair-path failed.
func printRun(ctx context.Context, o *options, client meshv1.MeshServiceClient, runID string) error {
	run, results, err := fetchRun(ctx, o, client, runID)
	if err != nil {
		return err
	}
	rows := report.Build(run, results)
	if o.output == "json" {
		if err := o.printJSON(&meshv1.WatchRunResponse{Run: run, Results: results}); err != nil {
			return err
		}
	} else {
		printPairPaths(o, run, rows)
	}
	line := report.SummaryLine(rows)
	out := o.stdout
	if o.output == "json" {
		out = o.stderr // keep stdout one JSON document
	}
	fmt.Fprintln(out, line)
	if ok, total := report.Summary(rows); ok != total || run.GetState() == measurev1.RunState_RUN_STATE_INTERRUPTED ||
		run.GetState() == measurev1.RunState_RUN_STATE_CANCELED {
		return &ExitError{Code: 1, Err: fmt.Errorf("run %s: %s (%s)", runID, line, testspec.RunStateName(run.GetState()))}
	}
	return nil
}

func printPairPaths(o *options, run *measurev1.Run, rows []*report.PairPath) {
	cols := report.Columns(rows)
	fmt.Fprintf(o.stdout, "run %s  %s  %s\n\n", run.GetRunId(), testspec.RunStateName(run.GetState()), runTimes(run))
	tw := newTable(o.stdout, "")
	head := []string{"SRC", "DST", "PATH"}
	v6 := report.RowsIPv6(rows) // a dual-stack run: a family per line
	if v6 {
		head = append(head, "FAMILY")
	}
	for _, c := range cols {
		head = append(head, testcell.Title(c))
	}
	fmt.Fprintln(tw, strings.Join(append(head, "VERDICT"), "\t"))
	for _, p := range rows {
		cells := []string{p.Src, p.Dst, testspec.PathName(p.Path)}
		if v6 {
			cells = append(cells, protocol.FamilyName(p.Family))
		}
		for _, c := range cols {
			cells = append(cells, p.Cell(c))
		}
		verdict := "OK"
		if !p.OK() {
			verdict = "FAILED"
		}
		fmt.Fprintln(tw, strings.Join(append(cells, verdict), "\t"))
	}
	_ = tw.Flush()
	var problems []string
	for _, p := range rows {
		for _, pr := range p.Problems() {
			problems = append(problems, fmt.Sprintf("  %s -> %s %s%s: %s", p.Src, p.Dst, testspec.PathName(p.Path), testcell.FamilySuffix(p.Family), pr))
		}
	}
	var notes []string
	for _, p := range rows {
		for _, n := range p.Notes() {
			notes = append(notes, fmt.Sprintf("  %s -> %s %s%s: %s", p.Src, p.Dst, testspec.PathName(p.Path), testcell.FamilySuffix(p.Family), n))
		}
	}
	fmt.Fprintf(o.stdout, "\n%s\n", legend(run))
	if len(problems) > 0 {
		fmt.Fprintf(o.stdout, "\nfailures:\n%s\n", strings.Join(problems, "\n"))
	}
	if len(notes) > 0 {
		fmt.Fprintf(o.stdout, "\nnotes (OK results whose tool said more):\n%s\n", strings.Join(notes, "\n"))
	}
	fmt.Fprintln(o.stdout)
}

// legend says what the cells hold.
func legend(run *measurev1.Run) string {
	l := "cells: ping's median RTT (and its loss, share of echo requests without a reply, when above 0); qperf latency is one-way (half the round trip); iperf3 is receiver-side throughput; HTTP is curl's total time."
	if r := run.GetSpec().GetRepeats(); r > 1 {
		l += fmt.Sprintf("\nEach cell is the median of %d samples.", r)
	}
	l += "\nqperf message size when not given: tcp_lat/udp_lat 1 B, tcp_bw 64 KiB, udp_bw 32 KiB; several sizes show as SIZE:value. A failed test shows its status."
	return l
}

func runTimes(run *measurev1.Run) string {
	start := run.GetCreateTime().AsTime()
	s := start.Local().Format(time.DateTime)
	if run.GetEndTime() != nil {
		s += fmt.Sprintf("  took %s", run.GetEndTime().AsTime().Sub(start).Round(100*time.Millisecond))
	}
	return s
}

type resultsFlags struct {
	src, dst, test, path, run string
	family                    string // --ip-family: ipv4 or ipv6; empty: both
	origin                    string // --origin: client or monitor; empty: both
	since, until              string
	limit                     int
}

func newResultsCommand(o *options) *cobra.Command {
	var rf resultsFlags
	cmd := &cobra.Command{
		Use:   "results",
		Short: "List stored results, filtered by node pair, path, test, run and time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput("table", "json", "csv"); err != nil {
				return err
			}
			req, err := rf.request(time.Now())
			if err != nil {
				return err
			}
			var (
				results []*measurev1.Result
				more    bool
			)
			err = withClient(o, func(c meshv1.MeshServiceClient) (err error) {
				results, more, err = listAll(cmd.Context(), o, c, req, rf.limit)
				return err
			})
			if err != nil {
				return err
			}
			if more {
				fmt.Fprintf(o.stderr, "showing the first %d results in (source, destination, start time) order; more match: narrow with --since/--run/--src/--dst or raise --limit (0: all)\n", rf.limit)
			}
			switch o.output {
			case "json":
				return o.printJSON(&meshv1.ListResultsResponse{Results: results})
			case "csv":
				return printResultsCSV(o, results)
			}
			printResults(o, results)
			return nil
		},
	}
	f := rf.pairFlags(cmd)
	f.StringVar(&rf.run, "run", "", "run ID")
	f.StringVar(&rf.family, "ip-family", "", "results of one IP family: ipv4 or ipv6 (default: both)")
	f.StringVar(&rf.origin, "origin", "", "results of the runs of one origin: client (on-demand runs) or monitor (the continuous monitor's) (default: both)")
	f.StringVar(&rf.since, "since", "", "results that started at or after this: a duration ago (1h30m) or RFC 3339 time")
	f.StringVar(&rf.until, "until", "", "results that started before this: a duration ago or RFC 3339 time")
	f.IntVar(&rf.limit, "limit", 1000, "most results to print (0: all)")
	return cmd
}

// pairFlags registers the filters the results and history commands share
// (--src, --dst, --test and --path) and returns cmd's flag set for the
// command's own.
func (rf *resultsFlags) pairFlags(cmd *cobra.Command) *pflag.FlagSet {
	f := cmd.Flags()
	f.StringVar(&rf.src, "src", "", "source node")
	f.StringVar(&rf.dst, "dst", "", "destination node")
	f.StringVar(&rf.test, "test", "", "test: "+strings.Join(testspec.TestNames(), ", "))
	f.StringVar(&rf.path, "path", "", "path: "+strings.Join(testspec.PathNames(), ", "))
	return f
}

func (rf *resultsFlags) request(now time.Time) (*meshv1.ListResultsRequest, error) {
	req := &meshv1.ListResultsRequest{SrcNode: rf.src, DstNode: rf.dst, RunId: rf.run}
	if rf.test != "" {
		t, err := testspec.ParseTest(rf.test)
		if err != nil {
			return nil, fmt.Errorf("--test: %w", err)
		}
		req.Test = t
	}
	if rf.path != "" {
		p, err := testspec.ParsePath(rf.path)
		if err != nil {
			return nil, fmt.Errorf("--path: %w", err)
		}
		req.Path = p
	}
	if rf.family != "" {
		fs, err := protocol.ParseFamilies(rf.family)
		if err != nil || len(fs) != 1 {
			return nil, fmt.Errorf("--ip-family %q: want ipv4 or ipv6", rf.family)
		}
		req.IpFamily = fs[0]
	}
	if rf.origin != "" {
		o, err := testspec.ParseOrigin(rf.origin)
		if err != nil {
			return nil, fmt.Errorf("--origin: %w", err)
		}
		req.Origin = o
	}
	for _, b := range []struct {
		flag, v string
		dst     **timestamppb.Timestamp
	}{{"since", rf.since, &req.StartTime}, {"until", rf.until, &req.EndTime}} {
		if b.v == "" {
			continue
		}
		t, err := parseTime(b.v, now)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", b.flag, err)
		}
		*b.dst = timestamppb.New(t)
	}
	if req.GetStartTime() != nil && req.GetEndTime() != nil && !req.GetStartTime().AsTime().Before(req.GetEndTime().AsTime()) {
		return nil, fmt.Errorf("--since %s is not before --until %s", rf.since, rf.until)
	}
	if rf.limit < 0 {
		return nil, fmt.Errorf("--limit %d: want 0 or more", rf.limit)
	}
	return req, nil
}

// parseTime reads "1h30m" (that long before now) or an RFC 3339 time.
func parseTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration ago must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (1h30m) nor an RFC 3339 time (2026-11-30T12:00:00Z)", s)
	}
	return t, nil
}

func printResults(o *options, results []*measurev1.Result) {
	tw := newTable(o.stdout, "START\tSRC\tDST\tPATH\tTEST\tSTATUS\tVALUE\tRUN\tMESSAGE")
	for _, r := range results {
		value := "-"
		if v, ok := testcell.Measured(r); ok {
			value = report.FormatHeadline(r.GetSpec().GetTest(), v)
			if loss := testcell.PingLoss([]*measurev1.Result{r}); loss > 0 {
				value += " " + report.FormatLoss(loss)
			}
			if size := r.GetQperf().GetMsgSizeBytes(); size > 0 {
				value += " @" + testcell.FormatBytes(size)
			}
			if load := report.LoadSummary(r); load != "" {
				value = load
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.GetStartTime().AsTime().Local().Format("2006-01-02 15:04:05.000"), r.GetSrcNode(), r.GetDstNode(),
			testspec.PathName(r.GetPath()), testspec.Name(r.GetSpec().GetTest()), testspec.StatusName(r.GetStatus()),
			value, r.GetRunId(), oneLine(r.GetMessage(), 80))
	}
	_ = tw.Flush()
	fmt.Fprintf(o.stdout, "%d results\n", len(results))
}

// printResultsCSV writes one row per result, figures in base units. value
// is the headline (testcell.Headline: ping's median RTT). The last columns
// summarise a ping run's replies, empty for other tests and failures:
// rtt_min_seconds, rtt_median_seconds (empty for a result of an agent
// older than the median), rtt_max_seconds and loss_ratio (0..1).
func printResultsCSV(o *options, results []*measurev1.Result) error {
	w := csv.NewWriter(o.stdout)
	_ = w.Write([]string{"start_time", "run_id", "test_id", "index", "src_node", "dst_node", "path", "test", "params",
		"status", "value", "unit", "elapsed_seconds", "tool_version", "message",
		"rtt_min_seconds", "rtt_median_seconds", "rtt_max_seconds", "loss_ratio",
		"requests_per_second", "latency_p50_seconds", "latency_p99_seconds", "failed_requests"})
	for _, r := range results {
		value := csvFloat(testcell.Measured(r))
		row := []string{r.GetStartTime().AsTime().UTC().Format(time.RFC3339Nano), r.GetRunId(), r.GetTestId(),
			strconv.Itoa(int(r.GetIndex())), r.GetSrcNode(), r.GetDstNode(), testspec.PathName(r.GetPath()),
			testspec.Name(r.GetSpec().GetTest()), testcell.ParamsKey(r.GetSpec()), testspec.StatusName(r.GetStatus()), value,
			testcell.Unit(r.GetSpec().GetTest()), strconv.FormatFloat(r.GetElapsed().AsDuration().Seconds(), 'g', -1, 64),
			safetext.CSVCell(r.GetToolVersion()), safetext.CSVCell(r.GetMessage())}
		row = append(row, pingColumns(r)...)
		_ = w.Write(append(row, loadColumns(r)...))
	}
	w.Flush()
	return w.Error()
}

// pingColumns are the rtt_min_seconds, rtt_median_seconds,
// rtt_max_seconds and loss_ratio columns of a result: empty unless it is
// an OK ping result.
func pingColumns(r *measurev1.Result) []string {
	p := r.GetPing()
	if r.GetStatus() != measurev1.Status_STATUS_OK || p == nil {
		return []string{"", "", "", ""}
	}
	return []string{csvFloat(p.GetRttMinSeconds(), true), csvFloat(p.GetRttMedianSeconds(), p.RttMedianSeconds != nil),
		csvFloat(p.GetRttMaxSeconds(), true), csvFloat(p.GetLossRatio(), true)}
}

// loadColumns are the requests_per_second, latency_p50_seconds,
// latency_p99_seconds and failed_requests columns of a result: empty
// unless it is an OK http_load result.
func loadColumns(r *measurev1.Result) []string {
	m := r.GetHttpLoad()
	if r.GetStatus() != measurev1.Status_STATUS_OK || m == nil {
		return []string{"", "", "", ""}
	}
	return []string{csvFloat(m.GetRequestsPerSecond(), true), csvFloat(m.GetLatencyP50Seconds(), true),
		csvFloat(m.GetLatencyP99Seconds(), true), strconv.FormatUint(m.GetFailedRequests(), 10)}
}

// csvFloat is a figure as a CSV cell: its shortest form, or "" when !ok
// or v is NaN or an infinity (never a non-finite number in a column that
// other tools read as numbers).
func csvFloat(v float64, ok bool) string {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// oneLine is s as a table cell (safetext.Line: on one line, control
// characters escaped) of at most n bytes, cut on a UTF-8 boundary.
func oneLine(s string, n int) string {
	s = safetext.Line(s)
	if len(s) > n {
		cut := n - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func newAgentsCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "agents",
		Short: "List the agents the coordinator knows, connected or not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			resp, err := unary(cmd.Context(), o, "list agents", func(ctx context.Context, c meshv1.MeshServiceClient) (*meshv1.ListAgentsResponse, error) {
				return c.ListAgents(ctx, &meshv1.ListAgentsRequest{})
			})
			if err != nil {
				return err
			}
			err = o.printTable(resp, "NODE\tSTATE\tGOSSIP\tCONNECTED\tHOST IP\tPOD IP\tSERVICE IP\tVERSION\tLAST SEEN\tTOOLS", func(tw io.Writer) {
				for _, a := range resp.GetAgents() {
					ips := map[measurev1.Network]string{}
					for _, ad := range a.GetAddresses() { // one per family: "IPv4,IPv6"
						if ips[ad.GetNetwork()] != "" {
							ips[ad.GetNetwork()] += ","
						}
						ips[ad.GetNetwork()] += ad.GetIp()
					}
					var tools []string
					for _, t := range a.GetTools() {
						v := t.GetVersion()
						if v == "" {
							v = "missing"
						}
						tools = append(tools, safetext.Line(v))
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\t%s\t%s\n", a.GetNodeName(), testspec.NodeStateName(a.GetState()), testspec.GossipStateOrDash(a.GetGossipState()), a.GetConnected(),
						dash(ips[measurev1.Network_NETWORK_HOST]), dash(ips[measurev1.Network_NETWORK_POD]), dash(joinNonEmpty(a.GetServiceIp(), a.GetServiceIpv6())),
						safetext.Line(a.GetAgentVersion()), a.GetLastSeenTime().AsTime().Local().Format(time.DateTime), strings.Join(tools, "; "))
				}
			})
			if err != nil || o.output == "json" {
				return err
			}
			for _, a := range resp.GetAgents() {
				if p := a.GetPartition(); p != "" {
					fmt.Fprintf(o.stdout, "partition: %s: %s\n", a.GetNodeName(), safetext.Line(p))
				}
			}
			return nil
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newRunsCommand(o *options) *cobra.Command {
	var (
		limit int
		token string
	)
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the newest runs: ID, label, origin, state, progress",
		Long: `List runs, newest first, --limit of them (page after page). When more
runs are older, the last line (or next_page_token in JSON) gives the
--page-token that lists the next ones.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 or more", limit)
			}
			var (
				runs []*measurev1.Run
				next string
			)
			err := withClient(o, func(c meshv1.MeshServiceClient) (err error) {
				runs, next, err = listRuns(cmd.Context(), o, c, token, limit)
				return err
			})
			if err != nil {
				return err
			}
			err = o.printTable(&meshv1.ListRunsResponse{Runs: runs, NextPageToken: next}, "RUN\tLABEL\tORIGIN\tSTATE\tTESTS\tFAILED\tROUNDS\tMESH\tSTARTED\tTOOK", func(tw io.Writer) {
				for _, r := range runs {
					took := "-"
					if r.GetEndTime() != nil {
						took = r.GetEndTime().AsTime().Sub(r.GetCreateTime().AsTime()).Round(100 * time.Millisecond).String()
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\n", r.GetRunId(), dash(r.GetSpec().GetLabel()),
						testspec.OriginName(testspec.OriginOf(r)), testspec.RunStateName(r.GetState()),
						r.GetTestsDone(), r.GetTestsPlanned(), r.GetTestsFailed(), r.GetRounds(), meshWindow(r),
						r.GetCreateTime().AsTime().Local().Format(time.DateTime), took)
				}
			})
			if err != nil || o.output == "json" {
				return err
			}
			if next != "" {
				fmt.Fprintf(o.stderr, "older runs: --page-token %s\n", next)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "most runs to list, newest first (0: all)")
	cmd.Flags().StringVar(&token, "page-token", "", "start after the runs an earlier listing printed (its last line)")
	return cmd
}

// meshWindow says which rounds of the full mesh a run measured: "full",
// "K/N from F" (RunSpec.mesh_rounds), or "-" for a run of named pairs.
func meshWindow(r *measurev1.Run) string {
	switch k, n := r.GetMeshRounds(), r.GetMeshRoundCount(); {
	case n == 0:
		return "-"
	case k == n:
		return "full"
	default:
		return fmt.Sprintf("%d/%d from %d", k, n, r.GetSpec().GetFirstMeshRound()%n)
	}
}

func newMaintenanceCommand(o *options) *cobra.Command {
	var off bool
	cmd := &cobra.Command{
		Use:   "maintenance NODE",
		Short: "Cordon a node (default meshes skip it; runs naming it still measure it); --off uncordons",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			resp, err := unary(cmd.Context(), o, fmt.Sprintf("maintenance %s", args[0]), func(ctx context.Context, c meshv1.MeshServiceClient) (*meshv1.SetMaintenanceResponse, error) {
				return c.SetMaintenance(ctx, &meshv1.SetMaintenanceRequest{NodeName: args[0], Maintenance: !off})
			})
			if err != nil {
				return err
			}
			return o.printLine(resp, fmt.Sprintf("node %s: %s", args[0], testspec.NodeStateName(resp.GetAgent().GetState())))
		},
	}
	cmd.Flags().BoolVar(&off, "off", false, "uncordon: end the maintenance")
	return cmd
}

// joinNonEmpty joins the non-empty strings of ss with ",": a dual-stack
// node's "IPv4,IPv6".
func joinNonEmpty(ss ...string) string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}
