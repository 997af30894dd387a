package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var (
	famUnset = measurev1.IPFamily_IP_FAMILY_UNSPECIFIED
	famV4    = measurev1.IPFamily_IP_FAMILY_IPV4
	famV6    = measurev1.IPFamily_IP_FAMILY_IPV6
)

// TestPackPKFamilies: an IPv4 series (family unset or IPV4) keeps the
// key bytes of before families; an IPv6 one has its own, and neither
// series' chunk prefix is a prefix of the other's.
func TestPackPKFamilies(t *testing.T) {
	for path := measurev1.Path_PATH_HOST_TO_HOST; path <= measurev1.Path_PATH_HOST_TO_SERVICE; path++ {
		for kind := measurev1.ProbeKind_PROBE_KIND_ICMP; kind <= measurev1.ProbeKind_PROBE_KIND_HTTP; kind++ {
			legacy := byte(path)<<4 | byte(kind)
			tests := []struct {
				fam  measurev1.IPFamily
				same bool // as the legacy key
			}{{famUnset, true}, {famV4, true}, {famV6, false}}
			for _, tt := range tests {
				pk := packPK(path, kind, tt.fam)
				if (pk == legacy) != tt.same {
					t.Errorf("packPK(%v, %v, %v) = %#x; legacy %#x, want same %v", path, kind, tt.fam, pk, legacy, tt.same)
				}
			}
			v4 := seriesPrefix(1, 2, packPK(path, kind, famV4))
			v6 := seriesPrefix(1, 2, packPK(path, kind, famV6))
			if want := []byte{0, 0, 0, 1, 0, 0, 0, 2, byte(path), byte(kind)}; !bytes.Equal(v4, want) {
				t.Errorf("IPv4 prefix %x, want %x (the layout of before families)", v4, want)
			}
			if bytes.HasPrefix(v4, v6) || bytes.HasPrefix(v6, v4) {
				t.Errorf("%v %v: IPv4 prefix %x and IPv6 prefix %x overlap", path, kind, v4, v6)
			}
		}
	}
}

// TestSeriesFamiliesApart stores each pair, path and kind in both
// families (IPv6 round trips 10x IPv4's) and reads every family back,
// from the head and from chunks: each read sees its family's samples
// only, and a page token of one family does not resume another's.
func TestSeriesFamiliesApart(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	start := t0.Truncate(SeriesBlock)
	const periods = 30
	rtt := func(fam measurev1.IPFamily, i int) time.Duration {
		d := time.Duration(100+i) * time.Microsecond
		if fam == famV6 {
			d *= 10
		}
		return d
	}
	for i := range periods {
		r := series.Report{Src: "node-a", Seq: uint64(i + 1), Start: start.Add(time.Duration(i) * 10 * time.Second), Period: 10 * time.Second}
		for _, fam := range []measurev1.IPFamily{famUnset, famV6} {
			for _, k := range kinds {
				d := rtt(fam, i)
				r.Summaries = append(r.Summaries, series.Summary{Dst: "node-b", Path: pod2pod, Kind: k, Family: fam, Sent: 1, Received: 1,
					RTTMin: d, RTTMedian: d, RTTP90: d, RTTMax: d, Status: measurev1.Status_STATUS_OK})
			}
		}
		stored, err := s.AppendReports(ctx, []series.Report{r})
		if err != nil || !stored[0] {
			t.Fatalf("period %d: stored %v, %v", i, stored, err)
		}
	}
	tests := []struct {
		name string
		fam  measurev1.IPFamily
		want measurev1.IPFamily // whose round trips the samples have
	}{
		{"unset is IPv4", famUnset, famV4},
		{"IPv4", famV4, famV4},
		{"IPv6", famV6, famV6},
	}
	check := func(stage string) {
		for _, tt := range tests {
			for _, k := range kinds {
				key := series.Key{Src: "node-a", Dst: "node-b", Path: pod2pod, Kind: k, Family: tt.fam}
				got, err := s.Series(ctx, key, time.Time{}, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != periods {
					t.Errorf("%s: %s %v: %d samples, want %d", stage, tt.name, k, len(got), periods)
					continue
				}
				for i, x := range got {
					if w := rtt(tt.want, i).Round(series.RTTResolution); x.RTTMedian != w {
						t.Errorf("%s: %s %v sample %d: rtt %v, want %v (the other family's?)", stage, tt.name, k, i, x.RTTMedian, w)
						break
					}
				}
			}
		}
	}
	check("head")
	if _, err := s.CompactSeries(ctx, start.Add(SeriesBlock)); err != nil {
		t.Fatal(err)
	}
	check("chunks")
	now := start.Add(time.Hour)
	k4 := series.Key{Src: "node-a", Dst: "node-b", Path: pod2pod, Kind: icmp}
	k6 := k4
	k6.Family = famV6
	_, tok, err := s.ListSeries(ctx, k4, time.Time{}, time.Time{}, now, 5, "")
	if err != nil || tok == "" {
		t.Fatalf("first IPv4 page: token %q, %v", tok, err)
	}
	if _, _, err := s.ListSeries(ctx, k6, time.Time{}, time.Time{}, now, 5, tok); err == nil {
		t.Error("an IPv4 page token resumed the IPv6 listing")
	}
	if err := validKey(series.Key{Src: "a", Dst: "b", Path: pod2pod, Kind: icmp, Family: 9}); err == nil {
		t.Error("family 9 accepted in a series key")
	}
}
