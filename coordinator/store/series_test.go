package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	icmp    = measurev1.ProbeKind_PROBE_KIND_ICMP
	tcp     = measurev1.ProbeKind_PROBE_KIND_TCP
	pod2pod = measurev1.Path_PATH_POD_TO_POD
	host2h  = measurev1.Path_PATH_HOST_TO_HOST
)

var paths = []measurev1.Path{host2h, pod2pod}
var kinds = []measurev1.ProbeKind{icmp, tcp}

// mesh makes reports like agents send: every src probes every dst on
// every path and kind, one report per src every period, starting at
// start; base RTTs per pair in 80-300 µs, noise, 1 period in 40 lossy.
type mesh struct {
	srcs, dsts []string
	period     time.Duration
	start      time.Time
	rng        *rand.Rand
	seq        map[string]uint64
}

func newMesh(nSrc, nDst int, start time.Time) *mesh {
	m := &mesh{period: 10 * time.Second, start: start, rng: rand.New(rand.NewPCG(7, 8)), seq: map[string]uint64{}}
	for i := 0; i < nSrc; i++ {
		m.srcs = append(m.srcs, fmt.Sprintf("node-%03d", i))
	}
	for i := 0; i < nDst; i++ {
		m.dsts = append(m.dsts, fmt.Sprintf("node-%03d", i))
	}
	return m
}

// period returns the reports of period i (its start is m.start + i periods).
func (m *mesh) reports(i int) []series.Report {
	start := m.start.Add(time.Duration(i) * m.period)
	out := make([]series.Report, 0, len(m.srcs))
	for si, src := range m.srcs {
		m.seq[src]++
		r := series.Report{Src: src, Seq: m.seq[src], Start: start, Period: m.period,
			Summaries: make([]series.Summary, 0, len(m.dsts)*4)}
		for di, dst := range m.dsts {
			base := 80 + float64((si*31+di*17)%220)
			for _, p := range paths {
				for _, k := range kinds {
					r.Summaries = append(r.Summaries, m.summary(dst, p, k, base))
				}
			}
		}
		out = append(out, r)
	}
	return out
}

func (m *mesh) summary(dst string, p measurev1.Path, k measurev1.ProbeKind, base float64) series.Summary {
	med := base * (0.9 + m.rng.Float64()*0.2)
	s := series.Summary{Dst: dst, Path: p, Kind: k, Sent: 10, Received: 10, Status: measurev1.Status_STATUS_OK,
		RTTMin: testutil.Micros(med * (0.8 + m.rng.Float64()*0.1)), RTTMedian: testutil.Micros(med), RTTP90: testutil.Micros(med * (1.1 + m.rng.Float64()*0.2))}
	s.RTTMax = s.RTTP90 + testutil.Micros(m.rng.Float64()*med)
	if m.rng.IntN(40) == 0 {
		s.Received, s.Status, s.Message = 9, measurev1.Status_STATUS_TIMEOUT, "probe timed out after 2s"
	}
	return s
}

// want is the samples of key in reports, as the store gives them back.
func want(key series.Key, reports ...[]series.Report) []series.Sample {
	var out []series.Sample
	for _, rs := range reports {
		for _, r := range rs {
			if r.Src != key.Src {
				continue
			}
			for _, m := range r.Summaries {
				if m.Dst == key.Dst && m.Path == key.Path && m.Kind == key.Kind {
					out = append(out, series.Quantize(m.Sample(r.Start, r.Period)))
				}
			}
		}
	}
	return out
}

var timeEq = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func TestSeriesAppendCompactQuery(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	m := newMesh(3, 4, t0.Truncate(SeriesBlock))
	var all [][]series.Report
	for i := 0; i < 1000; i++ { // 2.8 h: two blocks
		rs := m.reports(i)
		all = append(all, rs)
		stored, err := s.AppendReports(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		for j, ok := range stored {
			if !ok {
				t.Fatalf("period %d report %d not stored", i, j)
			}
		}
	}
	key := series.Key{Src: "node-001", Dst: "node-002", Path: pod2pod, Kind: tcp}
	check := func(stage string, from, to time.Time, wantN int) {
		t.Helper()
		got, err := s.Series(ctx, key, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var w []series.Sample
		for _, x := range want(key, all...) {
			if !x.Start.Before(from) && (to.IsZero() || x.Start.Before(to)) {
				w = append(w, x)
			}
		}
		if diff := cmp.Diff(w, got, timeEq); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", stage, diff)
		}
		if len(got) != wantN {
			t.Errorf("%s: %d samples, want %d", stage, len(got), wantN)
		}
	}
	check("head only", time.Time{}, time.Time{}, 1000)
	// Compact the first block, then part of the second (not at a block
	// boundary: the chunk is appended to by the next compaction).
	for _, before := range []time.Time{m.start.Add(SeriesBlock), m.start.Add(SeriesBlock + 20*time.Minute), m.start.Add(SeriesBlock + 40*time.Minute)} {
		if _, err := s.CompactSeries(ctx, before); err != nil {
			t.Fatal(err)
		}
		check("compacted to "+before.Format(time.TimeOnly), time.Time{}, time.Time{}, 1000)
	}
	check("range", m.start.Add(time.Hour), m.start.Add(2*time.Hour+30*time.Minute), 540)
	st, err := s.SeriesStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples != 1000*3*4*4 || st.HeadReports != 40*3 || st.Nodes != 4 {
		t.Errorf("stats %+v", st)
	}
	// Resends are refused, in the head and after compaction.
	for _, i := range []int{0, 999} {
		stored, err := s.AppendReports(ctx, all[i])
		if err != nil {
			t.Fatal(err)
		}
		if stored[0] || stored[2] {
			t.Errorf("period %d resent: stored %v", i, stored)
		}
	}
	check("after resends", time.Time{}, time.Time{}, 1000)
	n, err := s.DeleteSeriesBefore(ctx, m.start.Add(SeriesBlock+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 720*3*4*4 {
		t.Errorf("deleted %d samples, want %d", n, 720*3*4*4)
	}
	got, err := s.Series(ctx, key, time.Time{}, time.Time{})
	if err != nil || len(got) != 280 || !got[0].Start.Equal(m.start.Add(SeriesBlock)) {
		t.Errorf("after deletion: %d samples from %v, %v", len(got), got[0].Start, err)
	}
	if stored, _ := s.AppendReports(ctx, all[1]); stored[1] {
		t.Errorf("a deleted report's resend was stored")
	}
}

func TestAppendReportsRefusesBadReportsOnly(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	m := newMesh(4, 3, t0)
	rs := m.reports(0)
	rs[1].Summaries[5].RTTMin = rs[1].Summaries[5].RTTMedian + time.Microsecond
	rs[2].Summaries[7] = rs[2].Summaries[3]
	stored, err := s.AppendReports(ctx, rs)
	var re ReportErrors
	if !errors.As(err, &re) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ReportErrors wrapping ErrInvalid", err)
	}
	if diff := cmp.Diff([]bool{true, false, false, true}, stored); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	wants := []struct {
		index int
		text  string
	}{
		{1, "report 1 (src \"node-001\" seq 1): summary 5 (dst \"node-001\"): invalid series data: rtt_min"},
		{2, "report 2 (src \"node-002\" seq 1): invalid series data: summaries 3 and 7 have the same dst \"node-000\""},
	}
	if len(re) != len(wants) {
		t.Fatalf("errors %v", re)
	}
	for i, w := range wants {
		if re[i].Index != w.index || !strings.Contains(re[i].Error(), w.text) {
			t.Errorf("error %d = %d %v, want %d naming %q", i, re[i].Index, re[i].Err, w.index, w.text)
		}
	}
	got, err := s.Series(ctx, series.Key{Src: "node-003", Dst: "node-000", Path: host2h, Kind: icmp}, time.Time{}, time.Time{})
	if err != nil || len(got) != 1 {
		t.Errorf("good report: %d samples, %v", len(got), err)
	}
}

func TestAppendReportsRefuses(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	good := newMesh(1, 1, t0).reports(0)[0]
	mod := func(f func(r *series.Report)) series.Report {
		r := good
		r.Summaries = append([]series.Summary(nil), good.Summaries...)
		f(&r)
		return r
	}
	tests := []struct {
		name string
		r    series.Report
		want string
	}{
		{"bad src", mod(func(r *series.Report) { r.Src = "" }), "src is empty"},
		{"before epoch", mod(func(r *series.Report) { r.Start = time.Unix(-5, 0) }), "start"},
		{"negative period", mod(func(r *series.Report) { r.Period = -time.Second }), "period -1s"},
		{"bad dst", mod(func(r *series.Report) { r.Summaries[2].Dst = "a\x00" }), "summary 2"},
		{"unknown path", mod(func(r *series.Report) { r.Summaries[1].Path = 99 }), "path 99"},
		{"unknown kind", mod(func(r *series.Report) { r.Summaries[1].Kind = 0 }), "kind 0"},
		{"negative rtt", mod(func(r *series.Report) { r.Summaries[0].RTTMin = -1 }), "rtt_min -1ns"},
		{"p90 over max", mod(func(r *series.Report) { r.Summaries[0].RTTMax = r.Summaries[0].RTTP90 - 1 }), "rtt_p90"},
		{"received over sent", mod(func(r *series.Report) { r.Summaries[3].Received = 11 }), "received 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, err := s.AppendReports(ctx, []series.Report{tt.r})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "report 0") {
				t.Errorf("err = %v, want ErrInvalid naming report 0 and %q", err, tt.want)
			}
			if len(stored) != 1 || stored[0] {
				t.Errorf("stored = %v", stored)
			}
		})
	}
}

func TestSeriesKeyRefused(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	for _, k := range []series.Key{{Src: "", Dst: "b", Path: host2h, Kind: icmp}, {Src: "a", Dst: "b", Path: 0, Kind: icmp}} {
		if _, err := s.Series(ctx, k, time.Time{}, time.Time{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Series(%v) err = %v, want ErrInvalid", k, err)
		}
	}
	if got, err := s.Series(ctx, series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}, time.Time{}, time.Time{}); err != nil || got != nil {
		t.Errorf("unknown series: %v, %v", got, err)
	}
}
