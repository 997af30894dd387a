package series

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// period is one 10 s sample i periods after t0 with sent, received and
// round trips in µs (min, median, p90, max).
func period(i int, sent, received uint32, st measurev1.Status, rtt ...float64) Sample {
	s := Sample{Start: t0.Add(time.Duration(i) * 10 * time.Second), Period: 10 * time.Second, Sent: sent, Received: received, Status: st}
	if received > 0 {
		s.RTTMin, s.RTTMedian, s.RTTP90, s.RTTMax = testutil.Micros(rtt[0]), testutil.Micros(rtt[1]), testutil.Micros(rtt[2]), testutil.Micros(rtt[3])
	}
	return s
}

// repeat is n copies of s, one period apart from period i on.
func repeat(n, i int, s Sample) []Sample {
	out := make([]Sample, n)
	for j := range out {
		out[j] = s
		out[j].Start = t0.Add(time.Duration(i+j) * 10 * time.Second)
	}
	return out
}

// TestFold checks rollup points against figures computed by hand from
// the mixture of the periods' piecewise-linear distributions.
func TestFold(t *testing.T) {
	slow := repeat(54, 306, period(0, 10, 10, ok, 1800, 2000, 2200, 3000))
	for _, tt := range []struct {
		name    string
		samples []Sample
		want    Rollup
	}{
		{"identical periods keep their figures", []Sample{period(0, 10, 10, ok, 100, 200, 300, 400), period(1, 10, 10, ok, 100, 200, 300, 400)},
			Rollup{Periods: 2, Sent: 20, Received: 20, RTTMin: testutil.Micros(100), RTTMedian: testutil.Micros(200), RTTP90: testutil.Micros(300), RTTMax: testutil.Micros(400)}},
		// G(300) = (0.9+0)/2 = 0.45, slope 0.3 %/µs up to 400 (0.75):
		// 0.5 at 316.67 µs; then 0.2 %/µs: 0.9 at 475 µs.
		{"two overlapping periods", []Sample{period(0, 10, 10, ok, 100, 200, 300, 400), period(1, 10, 10, ok, 300, 400, 500, 600)},
			Rollup{Periods: 2, Sent: 20, Received: 20, RTTMin: testutil.Micros(100), RTTMedian: testutil.Micros(316.7), RTTP90: testutil.Micros(475), RTTMax: testutil.Micros(600)}},
		// One answer at 100 µs against nine at 200 µs: the median of the
		// medians would say 150 µs.
		{"weighted by answers", []Sample{period(0, 10, 1, timeout, 100, 100, 100, 100), period(1, 10, 9, timeout, 200, 200, 200, 200)},
			Rollup{Periods: 2, Sent: 20, Received: 10, RTTMin: testutil.Micros(100), RTTMedian: testutil.Micros(200), RTTP90: testutil.Micros(200), RTTMax: testutil.Micros(200),
				Failed: 2, LastStatus: timeout}},
		// 306 periods near 200 µs, 54 near 2 ms: the normal mass is 0.85,
		// so the median is at 0.588 of a normal period (200 + 20 x
		// 0.088/0.4 = 204.41 µs) and the p90 at a third of a slow one
		// (1800 + 200 x (1/3)/0.5 = 1933.33 µs). The median of the p90s
		// would say 220 µs.
		{"latency rising for the last 15% of the hour", append(repeat(306, 0, period(0, 10, 10, ok, 180, 200, 220, 300)), slow...),
			Rollup{Periods: 360, Sent: 3600, Received: 3600, RTTMin: testutil.Micros(180), RTTMedian: testutil.Micros(204.4), RTTP90: testutil.Micros(1933.3), RTTMax: testutil.Micros(3000)}},
		{"failures, the last one's status, no answers", []Sample{
			period(0, 10, 9, timeout, 100, 200, 300, 400), period(1, 10, 10, ok, 100, 200, 300, 400),
			period(2, 10, 0, measurev1.Status_STATUS_UNREACHABLE)},
			Rollup{Periods: 3, Sent: 30, Received: 19, RTTMin: testutil.Micros(100), RTTMedian: testutil.Micros(200), RTTP90: testutil.Micros(300), RTTMax: testutil.Micros(400),
				Failed: 2, LastStatus: measurev1.Status_STATUS_UNREACHABLE}},
		{"nothing answered", []Sample{period(0, 3, 0, timeout), period(1, 0, 0, ok)},
			Rollup{Periods: 2, Sent: 3, Failed: 1, LastStatus: timeout}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f Folder
			got, ok := f.Fold(tt.samples)
			tt.want.Start = BucketOf(t0)
			if tt.want.LastStatus == 0 {
				tt.want.LastStatus = measurev1.Status_STATUS_OK
			}
			if !ok {
				t.Fatal("no point")
			}
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("Fold (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("point does not validate: %v", err)
			}
			// The same samples fold to the same point (idempotence).
			if again, _ := f.Fold(tt.samples); again != got {
				t.Errorf("second fold %+v, first %+v", again, got)
			}
		})
	}
}

func TestFoldChunkAndMerge(t *testing.T) {
	var f Folder
	// Two hours and a bit of one series: 360 + 360 + 10 periods.
	var samples []Sample
	for i := 0; i < 730; i++ {
		samples = append(samples, period(i, 10, 10, ok, 100, 200, 300, 400))
	}
	points := f.FoldChunk(nil, samples)
	if len(points) != 3 || points[0].Periods != 360 || points[1].Periods != 360 || points[2].Periods != 10 ||
		!points[1].Start.Equal(t0.Add(time.Hour)) {
		t.Fatalf("FoldChunk: %+v", points)
	}
	// A late report of the first hour merges into its point: 5 answers
	// at 1-4 ms against 3,600 at 100-400 µs move the median by 1.7 ticks
	// (2.5 answers over the 1.44 a tick the first point puts past 200 µs).
	late, _ := f.Fold([]Sample{period(5, 10, 10, timeout, 1000, 2000, 3000, 4000)})
	late.Received, late.Failed = 5, 1
	merged := f.MergePoints(points[:2:2], []Rollup{late})
	if len(merged) != 2 {
		t.Fatalf("merged %+v", merged)
	}
	m := merged[0]
	if m.Periods != 361 || m.Sent != 3610 || m.Received != 3605 || m.Failed != 1 || m.LastStatus != timeout ||
		m.RTTMin != testutil.Micros(100) || m.RTTMax != testutil.Micros(4000) || m.RTTMedian != testutil.Micros(200.2) {
		t.Errorf("merged point %+v", m)
	}
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
	// Disjoint points interleave in order.
	got := f.MergePoints([]Rollup{points[0], points[2]}, []Rollup{points[1]})
	if len(got) != 3 || !got[1].Start.Equal(points[1].Start) {
		t.Errorf("interleaved %+v", got)
	}
}

// rollupsFrom is a valid, varied run of points: gaps, losses, failures,
// a point without answers.
func rollupsFrom(n int) []Rollup {
	rng := newRand(11)
	var out []Rollup
	start := BucketOf(t0)
	var f Folder
	for i := 0; i < n; i++ {
		var s []Sample
		for j := 0; j < 360; j++ {
			s = append(s, realistic(rng, 1)[0])
			s[j].Start = start.Add(time.Duration(j) * 10 * time.Second)
		}
		if i%7 == 3 {
			for j := range s {
				s[j].Received, s[j].Status, s[j].RTTMin, s[j].RTTMedian, s[j].RTTP90, s[j].RTTMax = 0, timeout, 0, 0, 0, 0
			}
		}
		r, _ := f.Fold(s)
		out = append(out, r)
		start = start.Add(RollupBucket * time.Duration(1+rng.IntN(3)/2*rng.IntN(40)))
	}
	return out
}

func TestRollupChunkRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 24, 200} {
		points := rollupsFrom(n)
		data, err := EncodeRollups(points)
		if err != nil {
			t.Fatalf("%d points: %v", n, err)
		}
		got, err := DecodeRollups(data)
		if err != nil {
			t.Fatalf("%d points: %v", n, err)
		}
		if l, err := RollupsLen(data); l != n || err != nil {
			t.Errorf("RollupsLen = %d, %v; want %d", l, err, n)
		}
		if diff := cmp.Diff(points, got, cmpOpts...); n > 0 && diff != "" {
			t.Errorf("%d points (-want +got):\n%s", n, diff)
		}
		if n > 1 {
			t.Logf("%d points: %d bytes, %.1f bytes a point", n, len(data), float64(len(data))/float64(n))
		}
	}
}

func TestEncodeRollupsRefuses(t *testing.T) {
	good := rollupsFrom(2)
	for _, tt := range []struct {
		name, want string
		edit       func(p []Rollup)
	}{
		{"unaligned start", "boundary", func(p []Rollup) { p[0].Start = p[0].Start.Add(time.Minute) }},
		{"out of order", "not after", func(p []Rollup) { p[1].Start = p[0].Start }},
		{"no periods", "periods is 0", func(p []Rollup) { p[0].Periods = 0 }},
		{"more received than sent", "above sent", func(p []Rollup) { p[0].Received = p[0].Sent + 1 }},
		{"failed without status", "not a failure status", func(p []Rollup) { p[0].Failed, p[0].LastStatus = 1, ok }},
		{"status without failure", "without a failed period", func(p []Rollup) { p[0].Failed, p[0].LastStatus = 0, timeout }},
		{"median under min", "above rtt_median", func(p []Rollup) { p[0].RTTMedian = p[0].RTTMin - time.Microsecond }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := append([]Rollup(nil), good...)
			p[0].Failed, p[0].LastStatus = 0, ok
			tt.edit(p)
			_, err := EncodeRollups(p)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
}

func TestDecodeRollupsRefuses(t *testing.T) {
	data, err := EncodeRollups(rollupsFrom(5))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"sample chunk version", append([]byte{9}, data[1:]...)},
		{"count beyond the bytes", []byte{1, 0xff, 0xff, 0x03, 0x80}},
		{"truncated", data[:len(data)-3]},
		{"trailing bytes", append(append([]byte(nil), data...), 0, 0)},
		{"first hour zero", []byte{1, 1, 0x00, 0x00}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeRollups(tt.data); !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// FuzzDecodeRollups: garbage gives an error wrapping ErrCorrupt, never a
// panic; what decodes is valid and re-encodes to the same bytes.
func FuzzDecodeRollups(f *testing.F) {
	for _, n := range []int{0, 1, 30} {
		data, err := EncodeRollups(rollupsFrom(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeRollups(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			return
		}
		again, err := EncodeRollups(got)
		if err != nil {
			t.Fatalf("decoded points do not encode: %v", err)
		}
		back, err := DecodeRollups(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, back, cmpOpts...); diff != "" {
			t.Errorf("re-encoded (-first +second):\n%s", diff)
		}
	})
}

// BenchmarkFold times folding an hour of 10 s periods into a point.
func BenchmarkFold(b *testing.B) {
	samples := realistic(newRand(3), 360)
	for i := range samples {
		samples[i].Start = t0.Add(time.Duration(i) * 10 * time.Second)
	}
	var f Folder
	b.ReportAllocs()
	for b.Loop() {
		f.Fold(samples)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(samples)), "ns/sample")
}
