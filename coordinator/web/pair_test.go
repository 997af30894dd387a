package web

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestPairAPIRollupsAndRaw: over 7 days, hourly rollups (older than the
// retention) and raw periods (newer) of one series are one line of hourly
// buckets: no hour missing where the rollups end, the hour that is partly
// rolled up and partly raw counted once with the sum of both, and every
// probe counted exactly once over the range.
func TestPairAPIRollupsAndRaw(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return now.Add(time.Duration(n) * time.Hour) }
	var rollups []*meshv1.ProbeRollup
	for i := -6; i < -3; i++ { // hours -6, -5, -4 rolled up
		rollups = append(rollups, &meshv1.ProbeRollup{BucketStart: timestamppb.New(h(i)), Bucket: durationpb.New(time.Hour), Periods: 360,
			Sent: 3600, Received: 3564, RttMedianSeconds: 1e-4, RttP90Seconds: 2e-4})
	}
	// Hour -4's first part is rolled up above; its rest (a retention
	// chunk that ends mid-hour) and hours -3 and -2 are raw.
	var samples []*meshv1.ProbeSample
	for at := h(-4).Add(40 * time.Minute); at.Before(h(-2)); at = at.Add(10 * time.Minute) {
		samples = append(samples, &meshv1.ProbeSample{PeriodStart: timestamppb.New(at), Period: durationpb.New(10 * time.Minute),
			Sent: 600, Received: 600, RttMedianSeconds: 1e-4, RttP90Seconds: 2e-4, Status: measurev1.Status_STATUS_OK})
	}
	src := meshSource([]string{"a", "b"}, "")
	src.series = map[measurev1.Path]*meshv1.ListProbeSeriesResponse{
		measurev1.Path_PATH_HOST_TO_HOST: {Rollups: rollups, Samples: samples},
	}
	u, err := New(Config{Source: src, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, rng := range []string{"7d", "24h"} {
		t.Run(rng, func(t *testing.T) {
			var p struct {
				StepSeconds float64 `json:"step_seconds"`
				Series      []struct {
					Path   string
					T      []int64
					Sent   []uint64
					Loss   []*float64
					Rollup []bool
				}
			}
			if err := json.Unmarshal([]byte(body(t, serve(t, u, "/api/v1/pair?src=a&dst=b&range="+rng))), &p); err != nil {
				t.Fatal(err)
			}
			if p.StepSeconds != 3600 || len(p.Series) != 1 {
				t.Fatalf("step %v s, %d series; want hourly buckets (rollups in range) and one series", p.StepSeconds, len(p.Series))
			}
			s := p.Series[0]
			var want []int64
			for i := -6; i < -2; i++ {
				want = append(want, h(i).Unix())
			}
			if len(s.T) != len(want) {
				t.Fatalf("buckets %v, want the hours %v without a gap", s.T, want)
			}
			var total uint64
			for i := range want {
				if s.T[i] != want[i] {
					t.Errorf("bucket %d at %d, want %d", i, s.T[i], want[i])
				}
				total += s.Sent[i]
			}
			// hour -4: its rollup (3600) and its two raw periods (1200)
			if s.Sent[2] != 3600+2*600 || !s.Rollup[2] || s.Rollup[3] {
				t.Errorf("hour -4 sent %d (rollup %v), hour -3 rollup %v: want 4800 from both, and -3 raw only", s.Sent[2], s.Rollup[2], s.Rollup[3])
			}
			if want := uint64(3*3600 + len(samples)*600); total != want {
				t.Errorf("%d probes over the range, want %d: each counted once", total, want)
			}
			if s.Loss[0] == nil || *s.Loss[0] != 0.01 || s.Loss[3] == nil || *s.Loss[3] != 0 {
				t.Errorf("loss %v %v, want 0.01 in a rolled-up hour and 0 in a raw one", s.Loss[0], s.Loss[3])
			}
		})
	}
}

// FuzzParseQuery: any query either parses, with every field valid, or is
// a paramError naming a parameter and its value; never a panic.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"test=ping&path=pod-pod", "src=a&dst=b&range=7d", "range=2h", "a=x&b=y", "test=ping&test=ping",
		"%zz", "src=%00", "page_token=abc", "kind=icmp", "x=1", ""} {
		f.Add(s)
	}
	allowed := []string{"test", "path", "src", "dst", "range", "a", "b", "page_token", "kind"}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseQuery(raw, allowed...)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || pe.name == "" || !strings.Contains(err.Error(), pe.name) {
				t.Fatalf("parseQuery(%q): %v, want a *paramError naming the parameter", raw, err)
			}
			return
		}
		if _, ok := ranges[q.rangeName]; !ok || q.span != ranges[q.rangeName] {
			t.Fatalf("parseQuery(%q): range %q span %v", raw, q.rangeName, q.span)
		}
		for _, v := range []string{q.src, q.dst, q.a, q.b} {
			if v != "" && checkName(v) != "" {
				t.Fatalf("parseQuery(%q) kept the bad name %q", raw, v)
			}
		}
		if vals, _ := url.ParseQuery(raw); len(vals["src"]) == 1 && vals["src"][0] != q.src {
			t.Fatalf("parseQuery(%q): src %q, want %q", raw, q.src, vals["src"][0])
		}
	})
}
