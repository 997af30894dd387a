package ingest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func okSummary(dst string) *agentv1.ProbeSummary {
	return &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: dst}, Path: measurev1.Path_PATH_HOST_TO_HOST,
		Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 6, Received: 6, RttMinSeconds: 80e-6, RttMedianSeconds: 100e-6,
		RttP90Seconds: 150e-6, RttMaxSeconds: 200e-6, Status: measurev1.Status_STATUS_OK}
}

func report(seq uint64, sums ...*agentv1.ProbeSummary) *agentv1.ProbeReport {
	return &agentv1.ProbeReport{Seq: seq, PeriodStart: timestamppb.New(now.Add(-time.Minute)), Period: durationpb.New(time.Minute),
		PlanVersion: 1, Summaries: sums}
}

var limits = Limits{Interval: 10 * time.Second, ReportInterval: time.Minute}

var (
	v4, v6 = measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	// dual is a dual-stack plan's limits: node-4 has no IPv6 address.
	dual = Limits{Interval: 10 * time.Second, ReportInterval: time.Minute, Families: []measurev1.IPFamily{v4, v6},
		HasAddr: func(name string, _ measurev1.Path, f measurev1.IPFamily) bool { return f == v4 || name != "node-4" }}
)

func TestCheck(t *testing.T) {
	modTo := func(dst string, f func(s *agentv1.ProbeSummary)) *agentv1.ProbeSummary {
		s := okSummary(dst)
		f(s)
		return s
	}
	mod := func(f func(s *agentv1.ProbeSummary)) *agentv1.ProbeSummary { return modTo("node-2", f) }
	tests := []struct {
		name     string
		r        *agentv1.ProbeReport
		l        Limits
		wantErr  string   // the whole report refused
		wantDrop []string // substrings of the dropped reasons, in order
		wantKept int      // summaries kept, valid or made invalid
		// wantInvalid are substrings of the invalid summaries' reasons, in
		// order; nil means none expected unless the case lists them.
		wantInvalid []string
	}{
		{"good", report(1, okSummary("node-2"), okSummary("node-3")), limits, "", nil, 2, nil},
		{"IPv6 in a plan without families", report(1, okSummary("node-2"), mod(func(s *agentv1.ProbeSummary) { s.IpFamily = v6 })),
			limits, "", []string{"summaries[1]: ip_family IP_FAMILY_IPV6 is not one of the plan's ip_families"}, 1, nil},
		{"both families, plan dual", report(1, okSummary("node-2"), mod(func(s *agentv1.ProbeSummary) { s.IpFamily = v4 }), mod(func(s *agentv1.ProbeSummary) { s.IpFamily = v6 })),
			dual, "", []string{"summaries[1]: a second summary of node-2 PATH_HOST_TO_HOST PROBE_KIND_ICMP IP_FAMILY_IPV4"}, 2, nil},
		{"IPv4 in an IPv6-only plan", report(1, okSummary("node-2")),
			Limits{Interval: 10 * time.Second, ReportInterval: time.Minute, Families: []measurev1.IPFamily{v6}}, "", []string{"summaries[0]: ip_family IP_FAMILY_IPV4 is not one of"}, 0, nil},
		{"IPv6 to a peer without an IPv6 address", report(1, modTo("node-4", func(s *agentv1.ProbeSummary) { s.IpFamily = v6 }), modTo("node-2", func(s *agentv1.ProbeSummary) { s.IpFamily = v6 })),
			dual, "", []string{`summaries[0]: ip_family IP_FAMILY_IPV6: dst.node "node-4" has no IPv6 address`}, 1, nil},
		{"unknown family", report(1, mod(func(s *agentv1.ProbeSummary) { s.IpFamily = 7 })), dual, "", []string{"summaries[0]: ip_family 7 is not an IP family"}, 0, nil},
		{"seq 0", report(0, okSummary("node-2")), limits, "seq is 0", nil, 0, nil},
		{"period over the report interval", func() *agentv1.ProbeReport {
			r := report(1)
			r.Period = durationpb.New(2 * time.Minute)
			return r
		}(), limits, "period 2m0s", nil, 0, nil},
		{"no period", func() *agentv1.ProbeReport { r := report(1); r.Period = nil; return r }(), limits, "period:", nil, 0, nil},
		{"future", func() *agentv1.ProbeReport {
			r := report(1)
			r.PeriodStart = timestamppb.New(now.Add(time.Hour))
			return r
		}(), limits, "ahead of the coordinator's clock", nil, 0, nil},
		{"ancient", func() *agentv1.ProbeReport {
			r := report(1)
			r.PeriodStart = timestamppb.New(now.Add(-30 * 24 * time.Hour))
			return r
		}(), limits, "older than", nil, 0, nil},
		{"too many", report(1, okSummary("a"), okSummary("b")), Limits{MaxSummaries: 1}, "2 summaries, at most 1", nil, 0, nil},
		{"bad figures invalid, bad names dropped, rest kept", report(1,
			modTo("n0", func(s *agentv1.ProbeSummary) { s.RttMedianSeconds = -5 }),
			modTo("n1", func(s *agentv1.ProbeSummary) { s.RttMaxSeconds = math.NaN() }),
			modTo("n2", func(s *agentv1.ProbeSummary) { s.RttMaxSeconds = math.Inf(1) }),
			modTo("n3", func(s *agentv1.ProbeSummary) { s.RttMaxSeconds = 1e300 }),
			modTo("n4", func(s *agentv1.ProbeSummary) { s.RttP90Seconds = 300e-6 }),
			modTo("n5", func(s *agentv1.ProbeSummary) { s.Received = 7 }),
			modTo("n6", func(s *agentv1.ProbeSummary) { s.Sent, s.Received = 1000, 1000 }),
			modTo("n7", func(s *agentv1.ProbeSummary) { s.Received = 5 }),
			modTo("n8", func(s *agentv1.ProbeSummary) {
				s.Received, s.Status = 0, measurev1.Status_STATUS_TIMEOUT
			}),
			mod(func(s *agentv1.ProbeSummary) { s.Status = 99 }),
			mod(func(s *agentv1.ProbeSummary) { s.Kind = 99 }),
			mod(func(s *agentv1.ProbeSummary) { s.Path = measurev1.Path_PATH_HOST_TO_EXTERNAL }),
			mod(func(s *agentv1.ProbeSummary) { s.Dst = &agentv1.ProbeSummary_Node{Node: "Bad_Name"} }),
			mod(func(s *agentv1.ProbeSummary) { s.Dst = &agentv1.ProbeSummary_ExternalTarget{ExternalTarget: "ext"} }),
			mod(func(s *agentv1.ProbeSummary) {
				s.Received, s.Status, s.Message = 5, measurev1.Status_STATUS_TIMEOUT, "\x1b[2Jgone"
			}),
			mod(func(s *agentv1.ProbeSummary) {
				s.Received, s.Status, s.Message = 5, measurev1.Status_STATUS_TIMEOUT, strings.Repeat("x", 300)
			}),
			okSummary("node-3"),
			okSummary("node-3"),
		), limits, "", []string{
			"summaries[9]: status 99", "summaries[10]: kind 99", "summaries[11]: path PATH_HOST_TO_EXTERNAL",
			"summaries[12]: dst.node", "summaries[13]: dst *agentv1.ProbeSummary_ExternalTarget",
			"summaries[14]: message", "summaries[15]: message of 300 bytes", "summaries[17]: a second summary of node-3",
		}, 10, []string{
			"summaries[0] (dst n0 PATH_HOST_TO_HOST PROBE_KIND_ICMP): rtt_median_seconds -5 is negative",
			"summaries[1] (dst n1 PATH_HOST_TO_HOST PROBE_KIND_ICMP): rtt_max_seconds NaN", "summaries[2] (dst n2 PATH_HOST_TO_HOST PROBE_KIND_ICMP): rtt_max_seconds +Inf",
			"summaries[3] (dst n3 PATH_HOST_TO_HOST PROBE_KIND_ICMP): rtt_max_seconds 1e+300 is over the probe timeout",
			"summaries[4] (dst n4 PATH_HOST_TO_HOST PROBE_KIND_ICMP): rtt_max_seconds 0.0002 is under rtt_p90_seconds 0.0003",
			"received 7 is over sent 6", "sent 1000 is over the 8 probes", "status OK with 5 of 6", "rtt_min_seconds 8e-05 with no probe answered",
		}},
		{"a second summary after an invalid one", report(1, mod(func(s *agentv1.ProbeSummary) { s.RttMinSeconds = -1 }), okSummary("node-2")),
			limits, "", []string{"summaries[1]: a second summary of node-2"}, 1, []string{"rtt_min_seconds -1 is negative"}},
		{"not a peer", report(1, okSummary("node-9")), Limits{IsPeer: func(n string) bool { return n == "node-2" }}, "",
			[]string{`dst.node "node-9" is not a peer`}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dropped, invalid, err := Check(tt.r, tt.l, now)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrBadReport containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(dropped) != len(tt.wantDrop) {
				t.Fatalf("dropped %d:\n%s\nwant %d", len(dropped), strings.Join(dropped, "\n"), len(tt.wantDrop))
			}
			for i, w := range tt.wantDrop {
				if !strings.Contains(dropped[i], w) {
					t.Errorf("dropped[%d] = %q, want it to contain %q", i, dropped[i], w)
				}
			}
			if got := len(tt.r.GetSummaries()); got != tt.wantKept {
				t.Errorf("kept %d summaries, want %d", got, tt.wantKept)
			}
			nInvalid := 0
			for _, s := range tt.r.GetSummaries() {
				if s.GetStatus() == measurev1.Status_STATUS_INVALID {
					nInvalid++
					if s.GetSent() != 0 || s.GetRttMaxSeconds() != 0 || !strings.Contains(s.GetMessage(), "failed the coordinator's checks") {
						t.Errorf("invalid summary %v still has figures or no reason", s)
					}
				}
			}
			if nInvalid != len(invalid) {
				t.Errorf("%d invalid summaries kept, %d reported", nInvalid, len(invalid))
			}
			if tt.wantInvalid != nil && len(invalid) != len(tt.wantInvalid) {
				t.Fatalf("invalid %v, want %d", invalid, len(tt.wantInvalid))
			}
			for i, w := range tt.wantInvalid {
				if !strings.Contains(invalid[i].Err.Error(), w) {
					t.Errorf("invalid[%d] = %v, want it to contain %q", i, invalid[i].Err, w)
				}
			}
		})
	}
}

func FuzzCheck(f *testing.F) {
	seed, _ := proto.Marshal(report(1, okSummary("node-2")))
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &agentv1.ProbeReport{}
		if proto.Unmarshal(b, r) != nil {
			return
		}
		before := len(r.GetSummaries())
		dropped, invalid, err := Check(r, limits, now)
		if err != nil {
			return
		}
		if len(invalid) > len(r.GetSummaries()) {
			t.Fatalf("%d invalid of %d kept", len(invalid), len(r.GetSummaries()))
		}
		if len(r.GetSummaries())+len(dropped) != before {
			t.Fatalf("%d kept + %d dropped != %d summaries", len(r.GetSummaries()), len(dropped), before)
		}
		for _, s := range r.GetSummaries() { // what is kept is believable
			if s.GetReceived() > s.GetSent() || s.GetRttMinSeconds() > s.GetRttMaxSeconds() || math.IsNaN(s.GetRttMedianSeconds()) ||
				s.GetRttMaxSeconds() > 61 || s.GetRttMinSeconds() < 0 {
				t.Fatalf("kept an unbelievable summary %v", s)
			}
		}
	})
}

// recorder is a WriteFunc that keeps the batches it got.
type recorder struct {
	mu      sync.Mutex
	batches [][]Report
	fail    error
	refuse  map[uint64]bool
	stored  map[uint64]bool // seqs answered ErrStoredAlready
}

func (r *recorder) write(_ context.Context, batch []Report) ([]error, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, r.fail
	}
	r.batches = append(r.batches, batch)
	refused := make([]error, len(batch))
	for i, b := range batch {
		switch seq := b.Report.GetSeq(); {
		case r.refuse[seq]:
			refused[i] = errors.New("refused")
		case r.stored[seq]:
			refused[i] = ErrStoredAlready
		}
	}
	return refused, nil
}

func TestGroupCommit(t *testing.T) {
	rec := &recorder{refuse: map[uint64]bool{3: true}, stored: map[uint64]bool{5: true}}
	in, err := New(Config{Write: rec.write, MaxDelay: 50 * time.Millisecond, MaxBatchSummaries: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- in.Run(runCtx) }()

	var mu sync.Mutex
	acked := map[uint64]bool{}
	for seq := uint64(1); seq <= 6; seq++ {
		err := in.Submit("node-1", report(seq, okSummary("node-2"), okSummary("node-3")), func() {
			mu.Lock()
			acked[seq] = true
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n == 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(acked) != 6 {
		t.Fatalf("acked %v, want all 6 (refused ones too, so the agent forgets them)", acked)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	total := 0
	for _, b := range rec.batches {
		if len(b) > 2 {
			t.Errorf("a batch of %d reports (%d summaries each): over MaxBatchSummaries 4", len(b), 2)
		}
		total += len(b)
	}
	if total != 6 || len(rec.batches) >= 6 {
		t.Errorf("%d reports in %d batches: want 6 in fewer than 6 (grouped)", total, len(rec.batches))
	}
	if st := in.Stats(); st.Reports != 5 || st.Resent != 1 || st.Refused != 1 || st.Summaries != 10 {
		t.Errorf("stats %+v, want 5 reports (1 resent), 10 summaries, 1 refused", st)
	}
	if err := in.Submit("node-1", report(9), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Run: %v, want ErrClosed", err)
	}
}

func TestWriteErrorAcksNothing(t *testing.T) {
	rec := &recorder{fail: errors.New("disk full")}
	in, _ := New(Config{Write: rec.write, MaxDelay: time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	acked := make(chan struct{}, 1)
	if err := in.Submit("node-1", report(1, okSummary("node-2")), func() { acked <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for in.Stats().WriteErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
	select {
	case <-acked:
		t.Fatal("a report whose write failed was acknowledged")
	default:
	}
	if in.Stats().WriteErrors == 0 {
		t.Fatal("no write error counted")
	}
}

func TestBusy(t *testing.T) {
	in, _ := New(Config{Write: (&recorder{}).write, MaxQueuedSummaries: 3})
	if err := in.Submit("n", report(1, okSummary("a"), okSummary("b")), nil); err != nil {
		t.Fatal(err)
	}
	if err := in.Submit("n", report(2, okSummary("a"), okSummary("b")), nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("second submit over the bound: %v, want ErrBusy", err)
	}
	if in.Stats().Busy != 1 {
		t.Fatalf("busy not counted: %+v", in.Stats())
	}
}
