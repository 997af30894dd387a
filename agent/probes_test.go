package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestContinuousProbes runs a real coordinator and three real agents on
// 127.0.0.1 to 127.0.0.3: each gets its plan, probes the others in-process
// (ICMP, TCP to the echo responder, HTTP to the HTTP target) every second
// and reports; the coordinator stores the series. When node-3's agent
// stops, node-1's reports show its TCP and HTTP probes failing within a
// few intervals, while ICMP (the kernel answers) stays OK, and the
// coordinator's judge names node-3 (agent-gone) on /metrics.
func TestContinuousProbes(t *testing.T) {
	settings := &agentv1.ProbeSettings{
		Interval: durationpb.New(time.Second), ReportInterval: durationpb.New(time.Second), Timeout: durationpb.New(500 * time.Millisecond),
		Kinds:        []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP, measurev1.ProbeKind_PROBE_KIND_HTTP},
		Paths:        []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		PayloadBytes: 56, MaxInFlight: 64, MaxPacketsPerSecond: 1000,
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	agentAddr, mesh, _ := startCoordinatorWith(t, func(c *coordinator.Config) {
		c.Probes, c.PlanDebounce, c.MetricsAddress = settings, 20*time.Millisecond, metricsAddr
	})
	a := baseConfig(t, agentAddr, "node-1")
	c := baseConfig(t, agentAddr, "node-2")
	c.HostIP = netip.MustParseAddr("127.0.0.2")
	b := baseConfig(t, agentAddr, "node-3")
	b.HostIP = netip.MustParseAddr("127.0.0.3")
	c.HTTPPort, b.HTTPPort = a.HTTPPort, a.HTTPPort // one port on every node, as in a cluster
	startAgent(t, a)
	startAgent(t, c)
	ctxB, stopB := context.WithCancel(testnet.Ctx(t, 2*time.Minute))
	doneB := make(chan error, 1)
	go func() { doneB <- agent.Run(ctxB, b) }()
	t.Cleanup(func() { stopB(); <-doneB }) //nolint:errcheck // waits for it to end: stopped here, its error is the stop's

	ctx := testnet.Ctx(t, 2*time.Minute)
	series := func(src, dst string, kind measurev1.ProbeKind, since time.Time) []*meshv1.ProbeSample {
		resp, err := mesh.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: src, DstNode: dst,
			Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: kind, StartTime: timestamppb.New(since)})
		if err != nil {
			t.Fatalf("ListProbeSeries %s->%s %v: %v", src, dst, kind, err)
		}
		return resp.GetSamples()
	}
	okSamples := func(ss []*meshv1.ProbeSample) int {
		n := 0
		for _, s := range ss {
			if s.GetStatus() == measurev1.Status_STATUS_OK && s.GetSent() > 0 && s.GetReceived() == s.GetSent() && s.GetRttMedianSeconds() > 0 {
				n++
			}
		}
		return n
	}
	start := time.Now().Add(-time.Minute)
	kinds := settings.GetKinds()
	if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool {
		for _, pair := range [][2]string{{"node-1", "node-2"}, {"node-2", "node-1"}, {"node-1", "node-3"}, {"node-3", "node-2"}} {
			for _, k := range kinds {
				if okSamples(series(pair[0], pair[1], k, start)) < 2 {
					return false
				}
			}
		}
		return true
	}) {
		for _, k := range kinds {
			t.Logf("node-1->node-2 %v: %v", k, series("node-1", "node-2", k, start))
		}
		t.Fatal("no two OK samples per pair and kind within 30 s")
	}
	for _, k := range kinds {
		for _, s := range series("node-1", "node-2", k, start) {
			if s.GetStatus() == measurev1.Status_STATUS_OK && (s.GetRttMedianSeconds() > 0.05 || s.GetRttMinSeconds() > s.GetRttMedianSeconds()) {
				t.Errorf("node-1->node-2 %v: implausible loopback figures %v", k, s)
			}
		}
	}

	stopB()
	<-doneB      //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
	doneB <- nil // for the cleanup
	stopped := time.Now()
	failed := func(k measurev1.ProbeKind) bool {
		for _, s := range series("node-1", "node-3", k, stopped) {
			if s.GetStatus() != measurev1.Status_STATUS_OK && s.GetReceived() < s.GetSent() {
				return true
			}
		}
		return false
	}
	if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool {
		return failed(measurev1.ProbeKind_PROBE_KIND_TCP) && failed(measurev1.ProbeKind_PROBE_KIND_HTTP)
	}) {
		t.Fatalf("node-3's agent stopped, yet node-1's TCP and HTTP probes of it did not fail within 15 s: tcp %v, http %v",
			series("node-1", "node-3", measurev1.ProbeKind_PROBE_KIND_TCP, stopped), series("node-1", "node-3", measurev1.ProbeKind_PROBE_KIND_HTTP, stopped))
	}
	if failed(measurev1.ProbeKind_PROBE_KIND_ICMP) {
		t.Errorf("node-1's ICMP probes of 127.0.0.3 failed, but the kernel answers them: %v",
			series("node-1", "node-3", measurev1.ProbeKind_PROBE_KIND_ICMP, stopped))
	}
	want := `meshperf_probe_fault{kind="agent-gone",node="node-3"} 1`
	var body string
	if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool {
		body = scrapeMetrics(t, metricsAddr)
		return strings.Contains(body, want)
	}) {
		t.Fatalf("/metrics has no %s within 15 s of node-3's agent stopping; its probe series:\n%s", want, grepLines(body, "meshperf_probe_"))
	}
	if faults := grepLines(body, "meshperf_probe_fault{"); strings.Contains(faults, `node="node-1"`) || strings.Contains(faults, `node="node-2"`) {
		t.Errorf("a healthy node is blamed:\n%s", faults)
	}
}

// TestReportsAfterASpoolLoss: an agent that restarts without its spool
// (here in memory only; a spool file lost with /run at a reboot is the
// same) numbers its reports from 1 again, under a new seq epoch; the
// coordinator stores them as the new reports they are, not as resends of
// the seqs it stored before the restart (which it would acknowledge and
// drop, counted in meshperf_probe_reports_resent_total).
func TestReportsAfterASpoolLoss(t *testing.T) {
	settings := &agentv1.ProbeSettings{
		Interval: durationpb.New(time.Second), ReportInterval: durationpb.New(time.Second),
		Timeout: durationpb.New(500 * time.Millisecond), Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_TCP},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, PayloadBytes: 56, MaxInFlight: 8, MaxPacketsPerSecond: 100,
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	agentAddr, mesh, _ := startCoordinatorWith(t, func(c *coordinator.Config) {
		c.Probes, c.PlanDebounce, c.MetricsAddress = settings, 20*time.Millisecond, metricsAddr
	})
	a := baseConfig(t, agentAddr, "node-1")
	b := baseConfig(t, agentAddr, "node-2")
	b.HostIP = netip.MustParseAddr("127.0.0.2")
	startAgent(t, b)
	ctx := testnet.Ctx(t, 2*time.Minute)
	samples := func(since time.Time) int {
		resp, err := mesh.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: "node-1", DstNode: "node-2",
			Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_TCP, StartTime: timestamppb.New(since)})
		if err != nil {
			t.Fatalf("ListProbeSeries: %v", err)
		}
		return len(resp.GetSamples())
	}
	since := time.Now().Add(-time.Minute)
	for life := range 2 {
		lifeCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- agent.Run(lifeCtx, a) }()
		// The first life stores more reports than the second needs, so
		// that every seq of the second was stored once before.
		want := []int{5, 2}[life]
		ok := testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return samples(since) >= want })
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("agent life %d: %v", life, err)
		}
		if !ok {
			t.Fatalf("agent life %d: %d samples of node-1 stored within 30 s, want %d", life, samples(since), want)
		}
		since = time.Now()
	}
	// Neither life resent a report (each had its own spool): none was
	// found stored already.
	body := scrapeMetrics(t, metricsAddr)
	if !strings.Contains(body, "\nmeshperf_probe_reports_resent_total 0\n") {
		t.Errorf("reports of the second life taken for resends:\n%s", grepLines(body, "meshperf_probe_reports_"))
	}
}

// scrapeMetrics returns the coordinator's /metrics text.
func scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
