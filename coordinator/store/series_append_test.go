package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// nodeIDs are the store's node names by ID, from the file.
func nodeIDs(t *testing.T, s *Store) map[uint32]string {
	t.Helper()
	out := map[uint32]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSeriesNodes).ForEach(func(k, v []byte) error {
			out[binary.BigEndian.Uint32(v)] = string(k)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fleetReport is src's report seq to dsts, 4 summaries each, in order.
func fleetReport(src string, seq uint64, dsts []string) series.Report {
	r := series.Report{Src: src, Seq: seq, Start: t0.Add(time.Duration(seq) * 10 * time.Second), Period: 10 * time.Second}
	for _, d := range dsts {
		for _, p := range paths {
			for _, k := range kinds {
				r.Summaries = append(r.Summaries, series.Summary{Dst: d, Path: p, Kind: k, Sent: 3, Received: 3,
					RTTMin: 90 * time.Microsecond, RTTMedian: 100 * time.Microsecond, RTTP90: 120 * time.Microsecond,
					RTTMax: 150 * time.Microsecond, Status: measurev1.Status_STATUS_OK})
			}
		}
	}
	return r
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	return out
}

// TestAppendReportsNewNodes stores batches naming nodes the store has no
// ID for (on one core and on several, valid and refused reports mixed,
// known and new names mixed in one report), and checks that each name
// gets its ID once, in the order the stored and validated reports first
// name it, and that every summary reads back.
func TestAppendReportsNewNodes(t *testing.T) {
	// 40 reports (prep takes one core per 16), each of a new src and
	// naming 200 nodes, 10 new ones after the first.
	big := names("big-", 600)
	var many []series.Report
	var manyOrder []string // the names as many first names them
	seen := map[string]bool{}
	for k := range 40 {
		r := fleetReport(fmt.Sprintf("src-%02d", k), 1, big[k*10:k*10+200])
		many = append(many, r)
		for _, name := range append([]string{r.Src}, big[k*10:k*10+200]...) {
			if !seen[name] {
				seen[name] = true
				manyOrder = append(manyOrder, name)
			}
		}
	}
	tests := []struct {
		name    string
		batches [][]series.Report
		// bad, if set, makes a report of the last batch invalid (its
		// names then get no ID).
		bad       func(rs []series.Report)
		wantOrder []string
	}{
		{
			name:      "one report",
			batches:   [][]series.Report{{fleetReport("s", 1, []string{"b", "a", "c"})}},
			wantOrder: []string{"s", "b", "a", "c"},
		},
		{
			name: "known and new in one report",
			batches: [][]series.Report{
				{fleetReport("s", 1, []string{"a", "b"})},
				{fleetReport("s", 2, []string{"a", "n", "b", "m"}), fleetReport("t", 1, []string{"m", "s", "o"})},
			},
			wantOrder: []string{"s", "a", "b", "n", "m", "t", "o"},
		},
		{
			name: "refused report names nothing",
			batches: [][]series.Report{
				{fleetReport("s", 1, []string{"a"}), fleetReport("bad", 1, []string{"z"}), fleetReport("t", 1, []string{"y", "a"})},
			},
			bad:       func(rs []series.Report) { rs[1].Summaries[2].Received = 9 },
			wantOrder: []string{"s", "a", "t", "y"},
		},
		{
			name:      "many reports on every core",
			batches:   [][]series.Report{many},
			wantOrder: manyOrder,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testnet.Ctx(t, time.Minute)
			s, _ := openTemp(t)
			for n, rs := range tt.batches {
				if n == len(tt.batches)-1 && tt.bad != nil {
					tt.bad(rs)
				}
				stored, err := s.AppendReports(ctx, rs)
				for i, ok := range stored {
					if want := tt.bad == nil || i != 1 || n != len(tt.batches)-1; ok != want {
						t.Errorf("batch %d report %d stored %v, want %v (err %v)", n, i, ok, want, err)
					}
				}
				if err != nil && tt.bad == nil {
					t.Fatalf("batch %d: %v", n, err)
				}
			}
			ids := nodeIDs(t, s)
			var order []string
			for id := uint32(1); id <= uint32(len(ids)); id++ {
				order = append(order, ids[id])
			}
			if diff := cmp.Diff(tt.wantOrder, order); diff != "" {
				t.Errorf("names by ID (-want +got):\n%s", diff)
			}
			for n, rs := range tt.batches {
				for i, r := range rs {
					if tt.bad != nil && i == 1 && n == len(tt.batches)-1 {
						continue
					}
					for _, m := range []series.Summary{r.Summaries[0], r.Summaries[len(r.Summaries)-1]} {
						key := series.Key{Src: r.Src, Dst: m.Dst, Path: m.Path, Kind: m.Kind}
						got, err := s.Series(ctx, key, r.Start, r.Start.Add(r.Period))
						want := []series.Sample{series.Quantize(m.Sample(r.Start, r.Period))}
						if err != nil || !cmp.Equal(want, got, timeEq) {
							t.Errorf("batch %d report %d %v: %v, %v, want %v", n, i, key, got, err, want)
						}
					}
				}
			}
		})
	}
}

// TestEncodeHeadEdges round-trips head summaries at the limits: largest
// counters, round trips and message, nothing answered, IDs far apart.
func TestEncodeHeadEdges(t *testing.T) {
	msg := strings.Repeat("m", series.MaxMessageBytes)
	top := series.MaxRTT
	tests := []struct {
		name string
		m    series.Summary
	}{
		{"plain", series.Summary{Sent: 1, Received: 1, RTTMin: 1, RTTMedian: 2, RTTP90: 3, RTTMax: 4, Status: measurev1.Status_STATUS_OK}},
		{"largest", series.Summary{Sent: math.MaxUint32, Received: math.MaxUint32, RTTMax: top, RTTP90: top, RTTMedian: top, RTTMin: top,
			Status: measurev1.Status_STATUS_OK}},
		{"spread", series.Summary{Sent: math.MaxUint32, Received: 1, RTTMax: top, Status: measurev1.Status_STATUS_TIMEOUT, Message: msg}},
		{"none answered", series.Summary{Sent: math.MaxUint32, Status: measurev1.Status_STATUS_TIMEOUT, Message: msg}},
		{"nothing sent", series.Summary{Status: measurev1.Status_STATUS_TIMEOUT}},
	}
	// One report of every case, each summary 40 times (groups of
	// headGroup start at all of them), dsts far apart.
	var summaries []series.Summary
	var entries []headEntry
	var want []series.Sample
	start, period := t0, 10*time.Second
	for rep := range 40 {
		for _, tt := range tests {
			m := tt.m
			m.Dst, m.Path, m.Kind = tt.name, paths[rep%2], kinds[rep/2%2]
			if err := m.Validate(); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			summaries = append(summaries, m)
			want = append(want, series.Quantize(m.Sample(start, period)))
		}
	}
	for j := range summaries {
		entries = append(entries, headEntry{dst: uint32(j) * 1_000_000, pk: pathKind(&summaries[j]), j: int32(j)})
	}
	entries[len(entries)-1].dst = math.MaxUint32
	v := encodeHead(make([]byte, 0, 8), start, period, summaries, entries)
	h, err := parseHead(v)
	if err != nil {
		t.Fatal(err)
	}
	var got []series.Sample
	var dsts []uint32
	err = h.each(func(dst uint32, pk byte, s *series.Sample) error {
		got, dsts = append(got, *s), append(dsts, dst)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, timeEq); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	for j, e := range entries {
		if dsts[j] != e.dst {
			t.Errorf("summary %d dst %d, want %d", j, dsts[j], e.dst)
		}
	}
}

// FuzzHeadRoundTrip: summaries made of the input that validate come back
// from encodeHead as Quantize makes them; bytes that are no head value
// give ErrCorrupt, never a panic.
func FuzzHeadRoundTrip(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), uint32(1))
	f.Add(make([]byte, 200), uint32(math.MaxUint32-40))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint32(7))
	f.Fuzz(func(t *testing.T, data []byte, firstDst uint32) {
		start, period := t0, 10*time.Second
		var summaries []series.Summary
		var entries []headEntry
		var want []series.Sample
		dst := uint64(firstDst)
		for len(data) >= 16 && dst <= math.MaxUint32 {
			b := data[:16]
			data = data[16:]
			sent := binary.LittleEndian.Uint32(b)
			if b[4]&1 == 0 {
				sent &= 0xff
			}
			received := min(sent, uint32(b[5])<<uint(b[6]%25))
			rtt := func(k int) time.Duration { return time.Duration(binary.LittleEndian.Uint16(b[7+2*k:])) << (b[15] % 27) }
			m := series.Summary{Dst: "d", Path: paths[b[4]>>1&1], Kind: kinds[b[4]>>2&1], Sent: sent, Received: received,
				Status: measurev1.Status_STATUS_OK}
			if received > 0 {
				r := []time.Duration{rtt(0), rtt(1), rtt(2), rtt(3)}
				slices.Sort(r)
				m.RTTMin, m.RTTMedian, m.RTTP90, m.RTTMax = r[0], r[1], r[2], r[3]
			}
			if b[4]&8 != 0 || received < sent {
				m.Status, m.Message = measurev1.Status_STATUS_TIMEOUT, strings.Repeat("x", int(b[4]>>4)*16)
			}
			if m.Validate() != nil {
				continue
			}
			entries = append(entries, headEntry{dst: uint32(dst), pk: pathKind(&m), j: int32(len(summaries))})
			summaries = append(summaries, m)
			want = append(want, series.Quantize(m.Sample(start, period)))
			dst += 1 + uint64(b[6])<<(b[5]%28)
		}
		v := encodeHead(nil, start, period, summaries, entries)
		h, err := parseHead(v)
		if err != nil {
			t.Fatal(err)
		}
		var got []series.Sample
		err = h.each(func(d uint32, pk byte, s *series.Sample) error {
			if e := entries[len(got)]; d != e.dst || pk != e.pk {
				t.Errorf("summary %d: dst %d pk %d, want %d %d", len(got), d, pk, e.dst, e.pk)
			}
			got = append(got, *s)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, timeEq); diff != "" {
			t.Errorf("samples (-want +got):\n%s", diff)
		}
		// The same bytes cut short or altered decode or fail with
		// ErrCorrupt.
		for _, bad := range [][]byte{v[:len(v)/2], append(slices.Clone(v[:len(v)-1]), v[len(v)-1]^0x80)} {
			h, err := parseHead(bad)
			if err == nil {
				err = h.each(func(uint32, byte, *series.Sample) error { return nil })
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt", err)
			}
		}
	})
}
