package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestLatestSamples stores three periods of a mesh, then a fourth from
// one source only, and checks that each source's newest report is the
// one read, that a source gone quiet before since is left out, and that
// only the path and kind asked for come back.
func TestLatestSamples(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	m := newMesh(3, 3, t0.Truncate(SeriesBlock))
	var last []series.Report // of each source, by index
	for i := range 3 {
		rs := m.reports(i)
		if _, err := s.AppendReports(ctx, rs); err != nil {
			t.Fatal(err)
		}
		last = rs
	}
	fourth := m.reports(3)[:1] // node-000 only
	if _, err := s.AppendReports(ctx, fourth); err != nil {
		t.Fatal(err)
	}
	newest := []series.Report{fourth[0], last[1], last[2]}
	expect := func(srcs []series.Report, path measurev1.Path, kind measurev1.ProbeKind) []LatestSample {
		var out []LatestSample
		for _, r := range srcs {
			for _, sm := range r.Summaries {
				if sm.Path == path && sm.Kind == kind {
					out = append(out, LatestSample{Key: series.Key{Src: r.Src, Dst: sm.Dst, Path: path, Kind: kind},
						Sample: series.Quantize(sm.Sample(r.Start, r.Period))})
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		path  measurev1.Path
		kind  measurev1.ProbeKind
		since time.Time
		want  []LatestSample
	}{
		{"every source", pod2pod, tcp, time.Time{}, expect(newest, pod2pod, tcp)},
		{"another path and kind", host2h, icmp, time.Time{}, expect(newest, host2h, icmp)},
		{"quiet sources left out", pod2pod, tcp, fourth[0].Start.Add(fourth[0].Period), expect(newest[:1], pod2pod, tcp)},
		{"all quiet", pod2pod, tcp, fourth[0].Start.Add(time.Hour), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.LatestSamples(ctx, tc.path, tc.kind, tc.since, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, timeEq); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	all := len(expect(newest, pod2pod, tcp))
	if got, err := s.LatestSamples(ctx, pod2pod, tcp, time.Time{}, all); err != nil || len(got) != all {
		t.Errorf("LatestSamples(limit %d) = %d samples, %v; want all of them", all, len(got), err)
	}
	if got, err := s.LatestSamples(ctx, pod2pod, tcp, time.Time{}, all-1); !errors.Is(err, ErrLimit) || got != nil {
		t.Errorf("LatestSamples(limit %d) = %d samples, %v; want ErrLimit and none", all-1, len(got), err)
	}
	for _, bad := range []struct {
		path measurev1.Path
		kind measurev1.ProbeKind
	}{{measurev1.Path_PATH_UNSPECIFIED, tcp}, {pod2pod, measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED}, {measurev1.Path(99), tcp}, {pod2pod, measurev1.ProbeKind(99)}} {
		if _, err := s.LatestSamples(ctx, bad.path, bad.kind, time.Time{}, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("LatestSamples(%v, %v) = %v, want ErrInvalid", bad.path, bad.kind, err)
		}
	}
}

// BenchmarkLatestSamples300 reads one path and kind of the newest period
// of a 300-node mesh (reports of 300 x 4 summaries): what the web UI's
// mesh page costs the store per report interval.
func BenchmarkLatestSamples300(b *testing.B) {
	ctx := testnet.Ctx(b, 5*time.Minute)
	s, _ := openTemp(b)
	m := newMesh(300, 300, t0.Truncate(SeriesBlock))
	for i := range 2 {
		if _, err := s.AppendReports(ctx, m.reports(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := s.LatestSamples(ctx, pod2pod, icmp, time.Time{}, 0)
		if err != nil || len(got) != 300*300 {
			b.Fatalf("%d samples, %v; want %d", len(got), err, 300*300)
		}
	}
}
