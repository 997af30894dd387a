package coordinator

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestJudgeProbesPeriod: judgeProbes judges a report period as soon as
// every node of the plans has reported in it, not at a tick and not at its
// deadline (here an hour away), and logs the fault with the period.
func TestJudgeProbesPeriod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	interval := time.Minute
	settings := &agentv1.ProbeSettings{Interval: durationpb.New(interval), ReportInterval: durationpb.New(interval),
		Timeout: durationpb.New(2 * time.Second)}
	peers := probeplan.NewTable(probeplan.Options{})
	nodes := []string{"node-1", "node-2", "node-3"}
	for i, n := range nodes {
		if _, _, err := peers.Upsert(probeplan.Peer{Name: n, HostIP: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), ProbePort: 7947}); err != nil {
			t.Fatal(err)
		}
	}
	var logs testutil.SyncBuffer
	p := &probeSink{peers: peers, settings: settings, reported: map[string]reported{}, judge: newProbeJudge(settings),
		judgeC: make(chan struct{}, 1), log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	done := make(chan error, 1)
	go func() { done <- p.judgeProbes(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("judgeProbes: %v", err)
		}
	}()

	// A period ending an hour from now: only its completeness can get it
	// judged during the test.
	start := time.Now().Add(time.Hour).Truncate(interval)
	for _, src := range nodes {
		r := &agentv1.ProbeReport{PeriodStart: timestamppb.New(start), Period: durationpb.New(interval)}
		for _, dst := range nodes {
			if dst == src {
				continue
			}
			for _, path := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD} {
				s := &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: dst}, Path: path, Kind: measurev1.ProbeKind_PROBE_KIND_TCP,
					Sent: 1, Received: 1, RttMedianSeconds: 1e-4}
				if path == measurev1.Path_PATH_POD_TO_POD && (src == "node-2" || dst == "node-2") {
					s.Received, s.Status, s.Message = 0, measurev1.Status_STATUS_TIMEOUT, "i/o timeout"
				}
				r.Summaries = append(r.Summaries, s)
			}
		}
		p.judge.AddReport(time.Now(), src, r)
		p.judgeC <- struct{}{}
	}
	wantEnd := "period_end=" + start.Add(interval).UTC().Format(time.RFC3339Nano)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		got := logs.String()
		p.mu.Lock()
		faults := p.faults
		p.mu.Unlock()
		if strings.Contains(got, `msg="probe fault localised" node=node-2 kind=pod-network`) && len(faults) > 0 {
			if !strings.Contains(got, "complete=true sources=3") || !strings.Contains(got, wantEnd) {
				t.Errorf("log %q: want the period judged complete, from 3 sources, with %s", got, wantEnd)
			}
			if len(faults) != 1 || faults[0].Node != "node-2" {
				t.Errorf("faults for /metrics %v, want node-2", faults)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no fault logged; log:\n%s", got)
		case <-tick.C:
		}
	}
}

// beforeRecorder is a seriesCompactor that keeps the before of each call.
type beforeRecorder struct{ befores chan time.Time }

func (b beforeRecorder) CompactSeries(_ context.Context, before time.Time) (int, error) {
	select {
	case b.befores <- before:
	default: // one is enough
	}
	return 0, nil
}

// TestCompactSeriesKeepsTheFreshReports: the periodic compaction leaves
// the reports of the probe mesh's freshness window in the head, where
// the mesh reads each node's newest: compacting up to now would empty
// the mesh for a report period each time (and the page fall back to a
// run).
func TestCompactSeriesKeepsTheFreshReports(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const keep = 35 * time.Second
	rec := beforeRecorder{befores: make(chan time.Time, 1)}
	done := make(chan error, 1)
	go func() { done <- compactSeries(ctx, rec, time.Millisecond, keep, slog.New(slog.DiscardHandler)) }()
	select {
	case before := <-rec.befores:
		if age := time.Since(before); age < keep {
			t.Errorf("compacted the reports that ended before %v ago, want %v or more", age, keep)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no compaction within 10 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
