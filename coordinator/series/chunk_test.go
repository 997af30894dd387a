package series

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	ok      = measurev1.Status_STATUS_OK
	timeout = measurev1.Status_STATUS_TIMEOUT
)

// okSample is a loss-free 10 s sample starting i periods after t0.
func okSample(i int, median float64) Sample {
	return Sample{
		Start: t0.Add(time.Duration(i) * 10 * time.Second), Period: 10 * time.Second,
		Sent: 10, Received: 10,
		RTTMin: testutil.Micros(median * 0.8), RTTMedian: testutil.Micros(median), RTTP90: testutil.Micros(median * 1.3), RTTMax: testutil.Micros(median * 2),
		Status: ok,
	}
}

// realistic is n samples of a ~200 µs path with noise, some loss and an
// occasional early-ended period.
func realistic(rng *rand.Rand, n int) []Sample {
	out := make([]Sample, 0, n)
	start := t0
	for i := 0; i < n; i++ {
		med := 80 + rng.Float64()*220
		s := Sample{Start: start, Period: 10 * time.Second, Sent: 10, Received: 10, Status: ok}
		if rng.IntN(50) == 0 {
			s.Received, s.Status, s.Message = 9, timeout, "probe 7 timed out after 2s"
			s.Period = 4 * time.Second
		}
		s.RTTMin = testutil.Micros(med * (0.7 + rng.Float64()*0.2))
		s.RTTMedian = testutil.Micros(med)
		s.RTTP90 = testutil.Micros(med * (1.1 + rng.Float64()*0.3))
		s.RTTMax = s.RTTP90 + testutil.Micros(rng.Float64()*200)
		out = append(out, s)
		start = start.Add(s.Period)
	}
	return out
}

func quantized(in []Sample) []Sample {
	var out []Sample
	for _, s := range in {
		out = append(out, Quantize(s))
	}
	return out
}

func TestChunkRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lost := okSample(1, 150)
	lost.Received, lost.RTTMin, lost.RTTMedian, lost.RTTP90, lost.RTTMax = 0, 0, 0, 0, 0
	lost.Status, lost.Message = measurev1.Status_STATUS_UNREACHABLE, "every probe was lost"
	gap := okSample(100, 150)
	odd := okSample(101, 150)
	odd.Start = odd.Start.Add(1234567 * time.Nanosecond)
	odd.Sent, odd.Received = 1<<32-1, 1<<31
	odd.RTTMin, odd.RTTMedian, odd.RTTP90, odd.RTTMax = 0, 0, MaxRTT, MaxRTT
	tests := []struct {
		name    string
		samples []Sample
	}{
		{"empty", nil},
		{"one", []Sample{okSample(0, 200)}},
		{"regular", []Sample{okSample(0, 200), okSample(1, 210), okSample(2, 190)}},
		{"loss, gap, odd values", []Sample{okSample(0, 200), lost, okSample(2, 90000), gap, odd}},
		{"ok drops its message", []Sample{{Start: t0, Period: time.Second, Sent: 1, Received: 1, Status: ok, Message: "dropped"}}},
		{"realistic day", realistic(rng, 8640)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := EncodeChunk(tt.samples)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeChunk(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(quantized(tt.samples), got, cmpOpts...); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			if n, err := ChunkLen(data); err != nil || n != len(tt.samples) {
				t.Errorf("ChunkLen = %d, %v; want %d", n, err, len(tt.samples))
			}
			if len(tt.samples) > 100 {
				t.Logf("%d samples in %d bytes: %.2f bytes/sample", len(tt.samples), len(data), float64(len(data))/float64(len(tt.samples)))
			}
		})
	}
}

var cmpOpts = []cmp.Option{cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}

func TestChunkSizeRealistic(t *testing.T) {
	data, err := EncodeChunk(realistic(rand.New(rand.NewPCG(3, 4)), 720))
	if err != nil {
		t.Fatal(err)
	}
	per := float64(len(data)) / 720
	t.Logf("realistic 2 h chunk: %d bytes, %.2f bytes/sample", len(data), per)
	if per > 9 {
		t.Errorf("%.2f bytes/sample, want <= 9", per)
	}
}

func TestAppendChunkRange(t *testing.T) {
	in := []Sample{okSample(0, 100), okSample(1, 100), okSample(2, 100), okSample(3, 100)}
	data, err := EncodeChunk(in)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		from, to time.Time
		want     []Sample
	}{
		{"unbounded", time.Time{}, time.Time{}, in},
		{"from inclusive", in[1].Start, time.Time{}, in[1:]},
		{"to exclusive", time.Time{}, in[2].Start, in[:2]},
		{"middle", in[1].Start, in[3].Start, in[1:3]},
		{"none", in[3].Start.Add(time.Second), time.Time{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendChunk(nil, data, tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(quantized(tt.want), got, cmpOpts...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeRefuses(t *testing.T) {
	mod := func(f func(*Sample)) Sample { s := okSample(0, 200); f(&s); return s }
	tests := []struct {
		name    string
		samples []Sample
		want    string
	}{
		{"min above median", []Sample{mod(func(s *Sample) { s.RTTMin = s.RTTMedian + 1 })}, "rtt_min"},
		{"median above p90", []Sample{mod(func(s *Sample) { s.RTTMedian = s.RTTP90 + 1 })}, "rtt_median"},
		{"p90 above max", []Sample{mod(func(s *Sample) { s.RTTP90 = s.RTTMax + 1 })}, "rtt_p90"},
		{"negative rtt", []Sample{mod(func(s *Sample) { s.RTTMin = -1 })}, "rtt_min"},
		{"rtt too long", []Sample{mod(func(s *Sample) { s.RTTMax = MaxRTT + 1 })}, "rtt_max"},
		{"rtt without answers", []Sample{mod(func(s *Sample) { s.Received = 0 })}, "received is 0"},
		{"received above sent", []Sample{mod(func(s *Sample) { s.Received = 11 })}, "received 11"},
		{"no period", []Sample{mod(func(s *Sample) { s.Period = 0 })}, "period"},
		{"negative period", []Sample{mod(func(s *Sample) { s.Period = -time.Second })}, "period"},
		{"before the epoch", []Sample{mod(func(s *Sample) { s.Start = time.Unix(-1, 0) })}, "start"},
		{"zero start", []Sample{mod(func(s *Sample) { s.Start = time.Time{} })}, "start"},
		{"unknown status", []Sample{mod(func(s *Sample) { s.Status = 99 })}, "status 99"},
		{"unspecified status", []Sample{mod(func(s *Sample) { s.Status = 0 })}, "status 0"},
		{"long message", []Sample{mod(func(s *Sample) { s.Status, s.Message = timeout, strings.Repeat("x", 257) })}, "message"},
		{"same start", []Sample{okSample(1, 100), okSample(1, 100)}, "sample 1: " + ErrInvalid.Error() + ": start"},
		{"going back", []Sample{okSample(2, 100), okSample(1, 100)}, "not after the previous"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeChunk(tt.samples)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid naming %q", err, tt.want)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	good, err := EncodeChunk([]Sample{okSample(0, 100), okSample(1, 100)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"nil", nil},
		{"wrong version", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-2]},
		{"trailing byte", append(append([]byte{}, good...), 0)},
		{"huge count", []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"count above bits", append([]byte{1, 50}, good[2:]...)},
		{"zero start", []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeChunk(tt.data); !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestReportValidate(t *testing.T) {
	sum := Summary{Dst: "node-2", Path: measurev1.Path_PATH_POD_TO_POD, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP,
		Sent: 10, Received: 10, RTTMin: testutil.Micros(90), RTTMedian: testutil.Micros(100), RTTP90: testutil.Micros(120), RTTMax: testutil.Micros(300), Status: ok}
	mod := func(f func(*Report)) Report {
		r := Report{Src: "node-1", Seq: 1, Start: t0, Period: 10 * time.Second, Summaries: []Summary{sum, sum}}
		r.Summaries = append([]Summary(nil), r.Summaries...)
		f(&r)
		return r
	}
	tests := []struct {
		name string
		r    Report
		want string // "" for valid
	}{
		{"valid", mod(func(*Report) {}), ""},
		{"no summaries", mod(func(r *Report) { r.Summaries = nil }), ""},
		{"empty src", mod(func(r *Report) { r.Src = "" }), "src is empty"},
		{"NUL in src", mod(func(r *Report) { r.Src = "a\x00b" }), "src \"a\\x00b\""},
		{"long dst", mod(func(r *Report) { r.Summaries[1].Dst = strings.Repeat("d", 254) }), "summary 1"},
		{"unknown path", mod(func(r *Report) { r.Summaries[1].Path = 42 }), "summary 1 (dst \"node-2\"): " + ErrInvalid.Error() + ": path 42"},
		{"unspecified kind", mod(func(r *Report) { r.Summaries[0].Kind = 0 }), "kind 0"},
		{"rtt order", mod(func(r *Report) { r.Summaries[1].RTTMin = testutil.Micros(101) }), "rtt_min 101µs is above rtt_median 100µs"},
		{"period", mod(func(r *Report) { r.Period = 2 * MaxPeriod }), "period 2h0m0s"},
		{"epoch", mod(func(r *Report) { r.Start = time.Unix(0, 0) }), "start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid naming %q", err, tt.want)
			}
		})
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }
