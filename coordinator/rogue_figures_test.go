package coordinator_test

import (
	"encoding/csv"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// absurdPing is ping metrics whose every RTT is v.
func absurdPing(v float64) *measurev1.Result {
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
		PacketsTransmitted: 3, PacketsReceived: 3, RttMinSeconds: v, RttAvgSeconds: v, RttMaxSeconds: v, RttMedianSeconds: &v}}}
}

// TestRogueFigures: a rogue agent that answers its client work with RTT
// -5 s, NaN and +Inf (ping) and 1e300 bit/s (iperf3), and sends a probe
// report with such round trips, has every one stored as STATUS_INVALID
// with the field and value in the message, counted in
// meshperf_results_invalid_total, warned about in the log, and shown by
// `coordinator results` (table and CSV) as no number.
func TestRogueFigures(t *testing.T) {
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	c := runAt(t, t.TempDir(), coordinator.Config{MetricsAddress: metricsAddr, Probes: &agentv1.ProbeSettings{
		Interval: durationpb.New(time.Second), ReportInterval: durationpb.New(10 * time.Second), Timeout: durationpb.New(500 * time.Millisecond),
		Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP, measurev1.ProbeKind_PROBE_KIND_HTTP,
			measurev1.ProbeKind_PROBE_KIND_ICMP_MTU},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}}, nil)
	ctx := testnet.Ctx(t, time.Minute)
	agentConn := dial(t, c.addr, insecureCreds())
	var pings atomic.Int32
	absurd := []float64{-5, math.NaN(), math.Inf(1)}
	rogue := playAgent(t, ctx, agentConn, "rogue", "127.0.0.1", func(w *agentv1.Work) *agentv1.WorkResult {
		rc := w.GetRunClient()
		if rc == nil {
			return fakeagent.ServerAnswer(w)
		}
		var r *measurev1.Result
		if rc.GetSpec().GetTest() == measurev1.Test_TEST_PING {
			r = absurdPing(absurd[int(pings.Add(1)-1)%len(absurd)])
		} else {
			r = &measurev1.Result{Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{
				ThroughputBps: 1e300, SenderThroughputBps: 1e300, DurationSeconds: 2}}}
		}
		r.Spec = rc.GetSpec()
		return fakeagent.ClientDone(w.GetWorkId(), r).GetWorkResult()
	})
	playAgent(t, ctx, agentConn, "node-2", "127.0.0.2", fakeagent.ServerAnswer)

	// The probe report: one summary per absurd round trip.
	now := time.Now()
	sum := func(kind measurev1.ProbeKind, v float64) *agentv1.ProbeSummary {
		return &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"}, Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: kind,
			Sent: 5, Received: 5, RttMinSeconds: v, RttMedianSeconds: v, RttP90Seconds: v, RttMaxSeconds: v, Status: measurev1.Status_STATUS_OK}
	}
	probeWant := map[measurev1.ProbeKind]string{
		measurev1.ProbeKind_PROBE_KIND_ICMP: "rtt_min_seconds -5 is negative", measurev1.ProbeKind_PROBE_KIND_TCP: "rtt_min_seconds NaN is not a finite number",
		measurev1.ProbeKind_PROBE_KIND_HTTP: "rtt_min_seconds +Inf is not a finite number", measurev1.ProbeKind_PROBE_KIND_ICMP_MTU: "rtt_min_seconds 1e+300 is over the probe timeout",
	}
	err := rogue.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: &agentv1.ProbeReport{
		Seq: 1, PeriodStart: timestamppb.New(now.Add(-10 * time.Second)), Period: durationpb.New(10 * time.Second), PlanVersion: 1,
		Summaries: []*agentv1.ProbeSummary{sum(measurev1.ProbeKind_PROBE_KIND_ICMP, -5), sum(measurev1.ProbeKind_PROBE_KIND_TCP, math.NaN()),
			sum(measurev1.ProbeKind_PROBE_KIND_HTTP, math.Inf(1)), sum(measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, 1e300)}}}})
	if err != nil {
		t.Fatal(err)
	}

	mesh := meshv1.NewMeshServiceClient(c.socketConn(t))
	trig, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests:   []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_IPERF3_TCP}},
		Paths:   []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Pairs:   []*measurev1.NodePair{{SrcNode: "rogue", DstNode: "node-2"}},
		Repeats: 3,
	}})
	if err != nil {
		t.Fatal(err)
	}
	runID := trig.GetRun().GetRunId()
	var results []*measurev1.Result
	if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool {
		resp, err := mesh.ListResults(ctx, &meshv1.ListResultsRequest{RunId: runID})
		results = resp.GetResults()
		return err == nil && len(results) == 6
	}) {
		t.Fatalf("run %s: %d results, want 6\n%s", runID, len(results), c.logs)
	}
	wantIn := map[string]bool{"rtt_min_seconds -5 is negative": false, "rtt_min_seconds NaN is not a finite number": false,
		"rtt_min_seconds +Inf is not a finite number": false, "throughput_bps 1e+300 is over the bound": false}
	for _, r := range results {
		if r.GetStatus() != measurev1.Status_STATUS_INVALID || r.GetMetrics() != nil {
			t.Errorf("result %s stored as %v with metrics %v, want STATUS_INVALID without metrics", r.GetTestId(), r.GetStatus(), r.GetMetrics())
		}
		for w := range wantIn {
			if strings.Contains(r.GetMessage(), w) {
				wantIn[w] = true
			}
		}
	}
	for w, seen := range wantIn {
		if !seen {
			t.Errorf("no stored result says %q", w)
		}
	}

	// The probe summaries: failed, invalid, with the reason; no sample.
	for kind, want := range probeWant {
		var samples []*meshv1.ProbeSample
		if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool {
			resp, err := mesh.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: "rogue", DstNode: "node-2",
				Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: kind, StartTime: timestamppb.New(now.Add(-time.Minute))})
			samples = resp.GetSamples()
			return err == nil && len(samples) > 0
		}) {
			t.Fatalf("%v: no stored sample\n%s", kind, c.logs)
		}
		s := samples[0]
		if s.GetStatus() != measurev1.Status_STATUS_INVALID || s.GetSent() != 0 || s.GetRttMaxSeconds() != 0 || !strings.Contains(s.GetMessage(), want) {
			t.Errorf("%v: stored %v, want STATUS_INVALID, no probe counted, no RTT, message with %q", kind, s, want)
		}
	}

	// Counted by source and reason.
	page := scrapeText(t, "http://"+metricsAddr+"/metrics")
	for _, w := range []struct {
		source, reason string
		atLeast        float64
	}{{"run", "negative", 1}, {"run", "not_finite", 2}, {"run", "out_of_bounds", 3},
		{"probe", "negative", 1}, {"probe", "not_finite", 2}, {"probe", "out_of_bounds", 1}} {
		re := regexp.MustCompile(`(?m)^meshperf_results_invalid_total\{reason="` + w.reason + `",source="` + w.source + `"\} (\S+)$`)
		m := re.FindStringSubmatch(page)
		if m == nil {
			t.Errorf("/metrics has no meshperf_results_invalid_total{source=%q,reason=%q}", w.source, w.reason)
			continue
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v < w.atLeast {
			t.Errorf("meshperf_results_invalid_total{source=%q,reason=%q} = %v, want at least %v", w.source, w.reason, v, w.atLeast)
		}
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "meshperf_") && (strings.HasSuffix(line, " NaN") || strings.HasSuffix(line, "Inf")) {
			t.Errorf("/metrics exports a non-finite figure: %s", line)
		}
	}
	for _, w := range []string{"result figures failed the checks", "probe report: summaries whose figures failed the checks"} {
		if !strings.Contains(c.logs.String(), w) || !strings.Contains(c.logs.String(), "node=rogue") {
			t.Errorf("log lacks %q for node rogue", w)
		}
	}

	// `coordinator results` shows them as invalid, never as a number.
	table := c.cli(t, "results", "--run", runID)
	cols := regexp.MustCompile(`\s{2,}`)
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		f := cols.Split(line, -1)
		if len(f) < 8 || f[1] != "rogue" {
			continue
		}
		rows++
		if f[5] != "invalid" || f[6] != "-" {
			t.Errorf("results row %q: status %q value %q, want invalid and -", line, f[5], f[6])
		}
	}
	if rows != 6 {
		t.Errorf("results table: %d rows of the rogue, want 6:\n%s", rows, table)
	}
	recs, err := csv.NewReader(strings.NewReader(c.cli(t, "results", "--run", runID, "-o", "csv"))).ReadAll()
	if err != nil || len(recs) != 7 {
		t.Fatalf("results CSV: %d records, %v", len(recs), err)
	}
	value := slices.Index(recs[0], "value")
	for _, rec := range recs[1:] {
		for i, cell := range rec {
			if recs[0][i] == "message" {
				continue // the reason names the value in words
			}
			if _, err := strconv.ParseFloat(cell, 64); err == nil && (strings.Contains(cell, "NaN") || strings.Contains(cell, "Inf") || strings.HasPrefix(cell, "-")) {
				t.Errorf("CSV column %s shows %q", recs[0][i], cell)
			}
		}
		if rec[value] != "" {
			t.Errorf("CSV value %q of an invalid result, want empty", rec[value])
		}
	}
}
