package diagnose

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var (
	probePaths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD}
	probeKinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, measurev1.ProbeKind_PROBE_KIND_TCP}
)

// slot is the probe interval of the tests; t0 a period's start.
const slot = 10 * time.Second

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

type lostFunc func(src, dst string, p measurev1.Path, k measurev1.ProbeKind) bool

// feedMesh adds one report per node of a full mesh of n nodes for the
// period starting at start; lost says whether a summary lost its probes,
// rtt its median.
func feedMesh(j *ProbeJudge, n int, start time.Time, lost lostFunc, rtt func(src, dst string) float64) {
	for i := range n {
		src := fmt.Sprintf("node-%d", i+1)
		r := &agentv1.ProbeReport{PeriodStart: timestamppb.New(start), Period: durationpb.New(slot)}
		for d := range n {
			if i == d {
				continue
			}
			dst := fmt.Sprintf("node-%d", d+1)
			for _, p := range probePaths {
				for _, k := range probeKinds {
					s := &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: dst}, Path: p, Kind: k, Sent: 6, Received: 6,
						Status: measurev1.Status_STATUS_OK}
					if lost(src, dst, p, k) {
						s.Received, s.Status, s.Message = 0, measurev1.Status_STATUS_TIMEOUT, "no answer"
					} else {
						m := rtt(src, dst)
						s.RttMinSeconds, s.RttMedianSeconds, s.RttP90Seconds, s.RttMaxSeconds = m, m, m, m
					}
					r.Summaries = append(r.Summaries, s)
				}
			}
		}
		j.AddReport(start, src, r)
	}
}

func involves(node, src, dst string) bool { return src == node || dst == node }
func flat(string, string) float64         { return 100e-6 }
func none(string, string, measurev1.Path, measurev1.ProbeKind) bool {
	return false
}

// judgeOne feeds one window of n nodes and judges it.
func judgeOne(t *testing.T, j *ProbeJudge, n int, start time.Time, lost lostFunc, rtt func(src, dst string) float64) ProbePeriod {
	t.Helper()
	feedMesh(j, n, start, lost, rtt)
	got := j.Due(start.Add(slot), n)
	if len(got) != 1 {
		t.Fatalf("Due judged %d periods, want the one complete", len(got))
	}
	return got[0]
}

func TestProbeJudge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name        string
		lost        lostFunc
		rtt         func(src, dst string) float64
		wantNode    string // "" for no finding
		wantKind    Kind
		wantSettled bool
	}{
		{"clean", none, flat, "", "", false},
		{"noise is no fault", func(string, string, measurev1.Path, measurev1.ProbeKind) bool { return rng.Float64() < 0.1 }, flat, "", "", false},
		{"pod network", func(src, dst string, p measurev1.Path, _ measurev1.ProbeKind) bool {
			return involves("node-3", src, dst) && p == measurev1.Path_PATH_POD_TO_POD
		}, flat, "node-3", KindPodNetwork, true},
		{"icmp dropped", func(src, dst string, _ measurev1.Path, k measurev1.ProbeKind) bool {
			return involves("node-2", src, dst) && k != measurev1.ProbeKind_PROBE_KIND_TCP
		}, flat, "node-2", KindICMP, true},
		{"mtu black hole", func(src, dst string, p measurev1.Path, k measurev1.ProbeKind) bool {
			return involves("node-4", src, dst) && k == measurev1.ProbeKind_PROBE_KIND_ICMP_MTU && p == measurev1.Path_PATH_HOST_TO_HOST
		}, flat, "node-4", KindMTU, true},
		{"mtu black hole on the pod network", func(src, dst string, p measurev1.Path, k measurev1.ProbeKind) bool {
			return involves("node-3", src, dst) && k == measurev1.ProbeKind_PROBE_KIND_ICMP_MTU && p == measurev1.Path_PATH_POD_TO_POD
		}, flat, "node-3", KindMTU, true},
		{"agent gone", func(src, dst string, p measurev1.Path, k measurev1.ProbeKind) bool {
			return involves("node-1", src, dst) && k == measurev1.ProbeKind_PROBE_KIND_TCP
		}, flat, "node-1", KindAgentGone, true},
		{"unreachable", func(src, dst string, _ measurev1.Path, _ measurev1.ProbeKind) bool {
			return involves("node-5", src, dst)
		}, flat, "node-5", KindUnreachable, true},
		{"slow", none, func(src, dst string) float64 {
			if involves("node-6", src, dst) {
				return 5e-3
			}
			return 100e-6
		}, "node-6", KindLatency, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewProbeJudge(ProbeJudgeConfig{Slot: slot})
			got := judgeOne(t, j, 6, t0, tt.lost, tt.rtt)
			if tt.wantNode == "" {
				if len(got.Verdicts) != 0 || len(got.Raised) != 0 {
					t.Fatalf("verdicts %v, raised %v, want none", got.Verdicts, got.Raised)
				}
				return
			}
			if len(got.Verdicts) != 1 || got.Verdicts[0].Node != tt.wantNode || got.Verdicts[0].Kind != tt.wantKind {
				t.Fatalf("verdicts %v, want one: %s %s", got.Verdicts, tt.wantNode, tt.wantKind)
			}
			if got.Settled[0] != tt.wantSettled {
				t.Errorf("settled %v, want %v", got.Settled[0], tt.wantSettled)
			}
			if tt.wantKind != KindLatency && len(got.Verdicts[0].Bad) == 0 {
				t.Errorf("verdict %v quotes no bad summary", got.Verdicts[0])
			}
			if raised := len(got.Raised) == 1; raised != tt.wantSettled {
				t.Errorf("raised %v after one window, want raised only when settled", got.Raised)
			}
			// The same evidence again: published (settled or confirmed).
			next := judgeOne(t, j, 6, t0.Add(slot), tt.lost, tt.rtt)
			if len(next.Faults) != 1 || next.Faults[0].Node != tt.wantNode || next.Faults[0].Kind != tt.wantKind {
				t.Errorf("faults after two windows %v, want %s %s", next.Faults, tt.wantNode, tt.wantKind)
			}
			clean := judgeOne(t, j, 6, t0.Add(2*slot), none, flat)
			if len(clean.Faults) != 0 || len(clean.Cleared) != 1 || clean.Cleared[0].Node != tt.wantNode {
				t.Errorf("a clean window: faults %v, cleared %v, want %s cleared", clean.Faults, clean.Cleared, tt.wantNode)
			}
		})
	}
}

// TestProbeJudgeOnset: a window in which a fault starts holds a part of
// its probes before it. An ICMP drop on node-2 that caught only its
// full-size echoes in the first window looks like an MTU black hole there;
// the judge must not publish that, and must publish icmp-blocked from the
// next, whole window.
func TestProbeJudgeOnset(t *testing.T) {
	j := NewProbeJudge(ProbeJudgeConfig{Slot: slot})
	onset := func(src, dst string, p measurev1.Path, k measurev1.ProbeKind) bool {
		// Half of node-2's full-size echo series were probed after the drop.
		return involves("node-2", src, dst) && k == measurev1.ProbeKind_PROBE_KIND_ICMP_MTU && (src + dst)[len(src+dst)-1]%2 == 0
	}
	first := judgeOne(t, j, 6, t0, onset, flat)
	if len(first.Verdicts) != 1 || first.Verdicts[0].Kind != KindMTU || first.Settled[0] {
		t.Fatalf("onset window: verdicts %v settled %v, want an unsettled mtu-blackhole on node-2", first.Verdicts, first.Settled)
	}
	if len(first.Raised) != 0 {
		t.Fatalf("onset window raised %v, want nothing", first.Raised)
	}
	whole := judgeOne(t, j, 6, t0.Add(slot), func(src, dst string, _ measurev1.Path, k measurev1.ProbeKind) bool {
		return involves("node-2", src, dst) && k != measurev1.ProbeKind_PROBE_KIND_TCP
	}, flat)
	if len(whole.Raised) != 1 || whole.Raised[0].Node != "node-2" || whole.Raised[0].Kind != KindICMP {
		t.Fatalf("whole window raised %v, want icmp-blocked on node-2", whole.Raised)
	}
}

// TestProbeJudgeWindows: a window is judged once every expected node has
// reported, or at its end plus the grace when one has not; a report for a
// window judged already, or one so old that its deadline has passed, is
// not counted.
func TestProbeJudgeWindows(t *testing.T) {
	j := NewProbeJudge(ProbeJudgeConfig{Slot: slot, Grace: 3 * time.Second})
	report := func(start time.Time, period time.Duration) *agentv1.ProbeReport {
		return &agentv1.ProbeReport{PeriodStart: timestamppb.New(start), Period: durationpb.New(period),
			Summaries: []*agentv1.ProbeSummary{{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"}, Path: probePaths[0], Kind: probeKinds[0], Sent: 1, Received: 1}}}
	}
	end := t0.Add(slot)
	for i, src := range []string{"node-1", "node-2"} {
		got, n, ok := j.AddReport(end, src, report(t0, slot))
		if !ok || !got.Equal(end) || n != i+1 {
			t.Fatalf("AddReport %s: window %v, %d sources, ok %v; want %v, %d, true", src, got, n, ok, end, i+1)
		}
	}
	if got := j.Due(end.Add(time.Second), 3); len(got) != 0 {
		t.Fatalf("2 of 3 nodes reported, before the grace: judged %d periods, want none", len(got))
	}
	if got := j.NextDeadline(); !got.Equal(end.Add(3 * time.Second)) {
		t.Errorf("NextDeadline %v, want %v", got, end.Add(3*time.Second))
	}
	got := j.Due(end.Add(3*time.Second), 3)
	if len(got) != 1 || got[0].Complete || got[0].Sources != 2 || !got[0].End.Equal(end) || !got[0].Start.Equal(t0) {
		t.Fatalf("at the deadline: %+v, want the incomplete window %v-%v of 2 sources", got, t0, end)
	}
	if _, _, ok := j.AddReport(end.Add(4*time.Second), "node-3", report(t0, slot)); ok {
		t.Error("a report for a judged window was counted")
	}
	// A period ended early, off the slot's multiples, belongs to the window
	// ending at the next multiple.
	if got, _, _ := j.AddReport(end, "node-3", report(end, 3*time.Second)); !got.Equal(end.Add(slot)) {
		t.Errorf("period %v+3s: window ending %v, want %v", end, got, end.Add(slot))
	}
	if got := j.Due(end.Add(slot), 1); len(got) != 1 || !got[0].Complete {
		t.Errorf("the one expected node reported: judged %+v, want the window complete", got)
	}
	old := end.Add(5 * slot)
	if _, _, ok := j.AddReport(old.Add(time.Minute), "node-1", report(old, slot)); ok {
		t.Error("a report whose deadline had passed opened a window")
	}
	if j.Open() != 0 {
		t.Errorf("%d windows open, want none", j.Open())
	}
}

// TestProbeJudgeOneVoice: a node's second report in a window is not
// counted, however many it sends: one rogue agent repeating "every probe
// to node-2 lost" in a clean 6-node mesh raises no fault on node-2 (with
// the repeats counted it would: 200 bad voices against 5 good). Sent
// before its honest report, its first lie is the one counted: the window
// shows its 6 bad summaries and still blames nobody.
func TestProbeJudgeOneVoice(t *testing.T) {
	for _, tc := range []struct {
		repeats int
		first   bool // the lies come before the mesh's reports
	}{{0, false}, {1, false}, {199, false}, {1, true}, {199, true}} {
		t.Run(fmt.Sprintf("%d repeats, lie first %v", tc.repeats, tc.first), func(t *testing.T) {
			j := NewProbeJudge(ProbeJudgeConfig{Slot: slot})
			if !tc.first {
				feedMesh(j, 6, t0, none, flat)
			}
			lie := func() *agentv1.ProbeReport {
				r := &agentv1.ProbeReport{PeriodStart: timestamppb.New(t0), Period: durationpb.New(slot)}
				for _, p := range probePaths {
					for _, k := range probeKinds {
						r.Summaries = append(r.Summaries, &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"},
							Path: p, Kind: k, Sent: 6, Status: measurev1.Status_STATUS_TIMEOUT, Message: "no answer"})
					}
				}
				return r
			}
			for i := range tc.repeats {
				_, n, ok := j.AddReport(t0, "node-6", lie())
				if counted := tc.first && i == 0; ok != counted {
					t.Fatalf("report %d of node-6's: counted %v, want %v", i, ok, counted)
				}
				if !tc.first && n != 6 {
					t.Fatalf("report %d of node-6's: %d sources, want 6", i, n)
				}
			}
			wantBad, wantSummaries := 0, 6*5*6
			if tc.first {
				feedMesh(j, 6, t0, none, flat)
				wantBad, wantSummaries = 6, 5*5*6+6
			}
			got := j.Due(t0.Add(slot), 6)
			if len(got) != 1 {
				t.Fatalf("judged %d periods, want 1", len(got))
			}
			p := got[0]
			if len(p.Verdicts) != 0 || p.Bad != wantBad || p.Sources != 6 || p.Reports != 6+tc.repeats || p.Summaries != wantSummaries {
				t.Errorf("verdicts %v, bad %d, sources %d, reports %d, summaries %d; want none, %d, 6, %d, %d",
					p.Verdicts, p.Bad, p.Sources, p.Reports, p.Summaries, wantBad, 6+tc.repeats, wantSummaries)
			}
		})
	}
}

// TestProbeJudgeSplitPeriods: a node whose settings changed within a
// window reports two periods that split it, and both count; a period
// overlapping a counted one, or a third, does not (a rogue sending many
// short periods is still at most two voices).
func TestProbeJudgeSplitPeriods(t *testing.T) {
	j := NewProbeJudge(ProbeJudgeConfig{Slot: slot})
	report := func(from, to time.Duration) *agentv1.ProbeReport {
		return &agentv1.ProbeReport{PeriodStart: timestamppb.New(t0.Add(from)), Period: durationpb.New(to - from),
			Summaries: []*agentv1.ProbeSummary{{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"}, Path: probePaths[0], Kind: probeKinds[0], Sent: 1, Received: 1}}}
	}
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		want     bool
	}{
		{"old settings' period", 0, 4 * time.Second, true},
		{"overlapping it", 3 * time.Second, 10 * time.Second, false},
		{"new settings' period", 4 * time.Second, 10 * time.Second, true},
		{"a third", 9 * time.Second, 10 * time.Second, false},
	} {
		if _, _, ok := j.AddReport(t0, "node-1", report(tc.from, tc.to)); ok != tc.want {
			t.Errorf("%s (%v-%v): counted %v, want %v", tc.name, tc.from, tc.to, ok, tc.want)
		}
	}
	got := j.Due(t0.Add(slot), 1)
	if len(got) != 1 || got[0].Sources != 1 || got[0].Reports != 4 || got[0].Summaries != 2 {
		t.Errorf("judged %+v, want one window of 1 source, 4 reports, 2 summaries", got)
	}
}

// BenchmarkProbeJudge1000 judges one window of a 1,000-node mesh (2 paths
// x 3 kinds: 6 million summaries) and reports the time of judging alone.
func BenchmarkProbeJudge1000(b *testing.B) {
	var judge time.Duration
	for range b.N {
		j := NewProbeJudge(ProbeJudgeConfig{Slot: slot})
		feedMesh(j, 1000, t0, func(src, dst string, _ measurev1.Path, _ measurev1.ProbeKind) bool {
			return src == "node-7" || dst == "node-7"
		}, flat)
		t := time.Now()
		got := j.Due(t0.Add(slot), 1000)
		judge += time.Since(t)
		if len(got) != 1 || len(got[0].Raised) != 1 {
			b.Fatalf("judged %+v, want node-7 raised", got)
		}
	}
	b.ReportMetric(float64(judge.Microseconds())/1000/float64(b.N), "judge_ms")
}
