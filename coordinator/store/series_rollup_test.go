package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// rep is a one-summary report of a -> dst (host-host, ICMP) for period i
// (10 s) from block on, round trips in µs.
func rep(seq uint64, block time.Time, i int, dst string, sent, received uint32, st measurev1.Status, rtt ...float64) series.Report {
	m := series.Summary{Dst: dst, Path: host2h, Kind: icmp, Sent: sent, Received: received, Status: st}
	if received > 0 {
		m.RTTMin, m.RTTMedian, m.RTTP90, m.RTTMax = testutil.Micros(rtt[0]), testutil.Micros(rtt[1]), testutil.Micros(rtt[2]), testutil.Micros(rtt[3])
	}
	if st != measurev1.Status_STATUS_OK {
		m.Message = "probe failed"
	}
	return series.Report{Src: "a", Seq: seq, Start: block.Add(time.Duration(i) * 10 * time.Second), Period: 10 * time.Second,
		Summaries: []series.Summary{m}}
}

// handSeries is two hours of a -> b: the first hour at 100/200/300/400
// µs with one lossy period (timeout) and one unanswered (unreachable),
// the second half at 100/200/300/400 and half at 300/400/500/600; and
// an hour of a -> c.
func handSeries(block time.Time) []series.Report {
	const okSt, timeout, unreach = measurev1.Status_STATUS_OK, measurev1.Status_STATUS_TIMEOUT, measurev1.Status_STATUS_UNREACHABLE
	var out []series.Report
	seq := uint64(0)
	add := func(r series.Report) { out = append(out, r) }
	for i := 0; i < 720; i++ {
		seq++
		switch {
		case i == 7:
			add(rep(seq, block, i, "b", 10, 9, timeout, 100, 200, 300, 400))
		case i == 8:
			add(rep(seq, block, i, "b", 10, 0, unreach))
		case i < 360 || i%2 == 0:
			add(rep(seq, block, i, "b", 10, 10, okSt, 100, 200, 300, 400))
		default:
			add(rep(seq, block, i, "b", 10, 10, okSt, 300, 400, 500, 600))
		}
		if i < 360 {
			out[len(out)-1].Summaries = append(out[len(out)-1].Summaries, rep(0, block, i, "c", 5, 5, okSt, 50, 60, 70, 80).Summaries[0])
		}
	}
	return out
}

func TestRollUpSeriesFigures(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	block := t0.Truncate(SeriesBlock)
	if _, err := s.AppendReports(ctx, handSeries(block)); err != nil {
		t.Fatal(err)
	}
	// Half compacted, half still in the head: RollUpSeries compacts the
	// rest itself.
	if _, err := s.CompactSeries(ctx, block.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c, err := s.RollUpSeries(ctx, block.Add(SeriesBlock), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SeriesRollupCounts{Chunks: 2, Samples: 1080, Points: 3, Batches: 1, Done: true}); !reflect.DeepEqual(c, want) {
		t.Errorf("counts %+v, want %+v", c, want)
	}
	const okSt = measurev1.Status_STATUS_OK
	for _, tt := range []struct {
		dst  string
		want []series.Rollup
	}{
		{"b", []series.Rollup{
			{Start: block, Periods: 360, Sent: 3600, Received: 3589, RTTMin: testutil.Micros(100), RTTMedian: testutil.Micros(200), RTTP90: testutil.Micros(300), RTTMax: testutil.Micros(400),
				Failed: 2, LastStatus: measurev1.Status_STATUS_UNREACHABLE},
			// Half and half: 0.5 at 316.67 µs, 0.9 at 475 µs (see series.TestFold).
			{Start: block.Add(time.Hour), Periods: 360, Sent: 3600, Received: 3600, RTTMin: testutil.Micros(100), RTTMedian: testutil.Micros(316.7), RTTP90: testutil.Micros(475),
				RTTMax: testutil.Micros(600), LastStatus: okSt},
		}},
		{"c", []series.Rollup{{Start: block, Periods: 360, Sent: 1800, Received: 1800, RTTMin: testutil.Micros(50), RTTMedian: testutil.Micros(60), RTTP90: testutil.Micros(70),
			RTTMax: testutil.Micros(80), LastStatus: okSt}}},
	} {
		key := series.Key{Src: "a", Dst: tt.dst, Path: host2h, Kind: icmp}
		got, err := s.SeriesRollups(ctx, key, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got, timeEq); diff != "" {
			t.Errorf("a -> %s (-want +got):\n%s", tt.dst, diff)
		}
		if raw, err := s.Series(ctx, key, time.Time{}, time.Time{}); err != nil || len(raw) != 0 {
			t.Errorf("a -> %s: %d raw samples left, %v", tt.dst, len(raw), err)
		}
	}
	// The hour after from, and none before.
	key := series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}
	for _, tt := range []struct {
		name     string
		from, to time.Time
		want     int
	}{
		{"overlapping the first hour's end", block.Add(59 * time.Minute), block.Add(61 * time.Minute), 2},
		{"from the second hour", block.Add(time.Hour), time.Time{}, 1},
		{"up to the second hour", time.Time{}, block.Add(time.Hour), 1},
		{"after both", block.Add(2 * time.Hour), time.Time{}, 0},
	} {
		got, err := s.SeriesRollups(ctx, key, tt.from, tt.to)
		if err != nil || len(got) != tt.want {
			t.Errorf("%s: %d points, %v; want %d", tt.name, len(got), err, tt.want)
		}
	}
}

// dump is a bucket's keys and values.
func dump(t *testing.T, s *Store, bucket []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// meshFile is a store file holding 12 hours of a 3 x 4 mesh (48 series,
// 6 blocks each: 288 chunks), compacted block by block.
func meshFile(t *testing.T, ctx context.Context) (path string, samples int) {
	t.Helper()
	s, path := openTemp(t)
	m := newMesh(3, 4, t0.Truncate(SeriesBlock))
	periods := int(12 * time.Hour / m.period)
	fill(t, ctx, s, m, 0, periods, 60, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, periods * 3 * 4 * 4
}

func copyFile(t testing.TB, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy.db")
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return to
}

func reopen(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRollUpSeriesCrash: a pass stopped after N batches (the process
// killed between two transactions) or failing inside batch N (killed
// before its commit), then reopened and run to the end, leaves the
// same rollups as an uninterrupted pass: nothing lost, nothing counted
// twice. Running a pass again changes nothing.
func TestRollUpSeriesCrash(t *testing.T) {
	ctx := testnet.Ctx(t, 2*time.Minute)
	template, samples := meshFile(t, ctx)
	cutoff := t0.Truncate(SeriesBlock).Add(12 * time.Hour)
	const batch = 7 // 288 chunks: 42 batches

	ref := reopen(t, copyFile(t, template))
	ref.rollupBatch = batch
	c, err := ref.RollUpSeries(ctx, cutoff, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Chunks != 288 || c.Samples != samples || c.Batches != 42 || !c.Done {
		t.Fatalf("uninterrupted pass %+v, want 288 chunks, %d samples, 42 batches", c, samples)
	}
	want := dump(t, ref, bucketSeriesRollups)
	if len(want) != 48 || len(dump(t, ref, bucketSeriesChunks)) != 0 {
		t.Fatalf("%d rollup chunks, want 48 (one a series: 12 h of one day)", len(want))
	}
	periods := uint64(0)
	for _, v := range want {
		points, err := series.DecodeRollups([]byte(v))
		if err != nil || len(points) != 12 {
			t.Fatalf("%d points, %v; want 12", len(points), err)
		}
		for _, p := range points {
			periods += p.Periods
		}
	}
	if periods != uint64(samples) {
		t.Errorf("rollups hold %d periods, want %d", periods, samples)
	}
	// Again: nothing to do, nothing changes.
	if c, err := ref.RollUpSeries(ctx, cutoff, 0); err != nil || !reflect.DeepEqual(c, SeriesRollupCounts{Done: true}) {
		t.Errorf("second pass %+v, %v", c, err)
	}
	if diff := cmp.Diff(want, dump(t, ref, bucketSeriesRollups)); diff != "" {
		t.Errorf("second pass changed the rollups")
	}
	_ = ref.Close()

	errCrash := errors.New("killed")
	for _, tt := range []struct {
		name  string
		stop  int // batches committed before the kill
		fault int // the batch that dies before its commit (-1: none)
	}{
		{"killed before the first batch", 0, -1},
		{"killed after one batch", 1, -1},
		{"killed after 20 batches", 20, -1},
		{"killed after the last batch", 42, -1},
		{"killed inside the first batch", 0, 0},
		{"killed inside batch 13", 0, 13},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := copyFile(t, template)
			s := reopen(t, path)
			s.rollupBatch = batch
			if tt.fault >= 0 {
				s.rollupFault = func(b int) error {
					if b == tt.fault {
						return errCrash
					}
					return nil
				}
				c, err := s.RollUpSeries(ctx, cutoff, 0)
				if !errors.Is(err, errCrash) || c.Batches != tt.fault {
					t.Fatalf("faulty pass %+v, %v; want %d batches and the crash", c, err, tt.fault)
				}
			} else if tt.stop > 0 {
				if c, err := s.RollUpSeries(ctx, cutoff, tt.stop); err != nil || c.Batches != tt.stop {
					t.Fatalf("first %d batches: %+v, %v", tt.stop, c, err)
				}
			}
			_ = s.Close()
			s = reopen(t, path)
			defer func() { _ = s.Close() }()
			s.rollupBatch = batch
			c, err := s.RollUpSeries(ctx, cutoff, 0)
			if err != nil || !c.Done {
				t.Fatalf("after the restart: %+v, %v", c, err)
			}
			doneBefore := max(tt.stop, tt.fault)
			if wantChunks := max(0, 288-doneBefore*batch); c.Chunks != wantChunks {
				t.Errorf("after the restart %d chunks rolled up, want %d", c.Chunks, wantChunks)
			}
			if diff := cmp.Diff(want, dump(t, s, bucketSeriesRollups)); diff != "" {
				t.Errorf("rollups differ from the uninterrupted pass's")
			}
			if left := dump(t, s, bucketSeriesChunks); len(left) != 0 {
				t.Errorf("%d raw chunks left", len(left))
			}
		})
	}
}

// TestRollUpSeriesLate: a report that arrives after its hour was rolled
// up is compacted into a new chunk of the old block and merged into the
// hour's point by the next pass, once.
func TestRollUpSeriesLate(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	block := t0.Truncate(SeriesBlock)
	if _, err := s.AppendReports(ctx, handSeries(block)); err != nil {
		t.Fatal(err)
	}
	cutoff := block.Add(SeriesBlock)
	if _, err := s.RollUpSeries(ctx, cutoff, 0); err != nil {
		t.Fatal(err)
	}
	// Period 9 of the first hour again, sent late under a new seq: it
	// is a new sample (Start 90 s), not a resend.
	late := rep(5000, block, 9, "b", 10, 10, measurev1.Status_STATUS_TIMEOUT, 1000, 2000, 3000, 4000)
	late.Start = late.Start.Add(5 * time.Second)
	late.Summaries[0].Received = 5
	if _, err := s.AppendReports(ctx, []series.Report{late}); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ {
		if _, err := s.RollUpSeries(ctx, cutoff, 0); err != nil {
			t.Fatal(err)
		}
		got, err := s.SeriesRollups(ctx, series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}, time.Time{}, time.Time{})
		if err != nil || len(got) != 2 {
			t.Fatalf("pass %d: %d points, %v", pass, len(got), err)
		}
		if p := got[0]; p.Periods != 361 || p.Sent != 3610 || p.Received != 3594 || p.Failed != 3 ||
			p.LastStatus != measurev1.Status_STATUS_TIMEOUT || p.RTTMax != testutil.Micros(4000) || p.RTTMin != testutil.Micros(100) {
			t.Errorf("pass %d: merged point %+v", pass, p)
		}
	}
}

// TestRollUpSeriesCorrupt: a chunk or rollup chunk that does not decode
// is an error wrapping ErrCorrupt naming its bucket and key. Reads stop
// there; a roll-up pass moves it, as it is, to the quarantine bucket and
// goes on, so that retention is not stuck behind it and nothing is lost.
func TestRollUpSeriesCorrupt(t *testing.T) {
	block := t0.Truncate(SeriesBlock)
	other, err := series.EncodeChunk([]series.Sample{{Start: block.Add(-time.Hour), Period: 10 * time.Second, Sent: 1, Received: 1,
		RTTMin: testutil.Micros(1), RTTMedian: testutil.Micros(2), RTTP90: testutil.Micros(3), RTTMax: testutil.Micros(4), Status: measurev1.Status_STATUS_OK}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		bucket []byte
		key    func(k []byte) []byte // from a -> b's first chunk key
		val    []byte
		call   func(ctx context.Context, s *Store) error
		want   string
	}{
		{"garbage chunk", bucketSeriesChunks, func(k []byte) []byte { return k }, []byte{1, 5, 0xff}, rollUp,
			`series_chunks key 00000001000000020101`},
		{"chunk version", bucketSeriesChunks, func(k []byte) []byte { return k }, []byte{7, 0}, rollUp, `("a" -> "b", path 1, kind 1, block`},
		{"short chunk key", bucketSeriesChunks, func(k []byte) []byte { return k[:5] }, []byte{1, 0}, rollUp, "series_chunks key 0000000100"},
		{"samples outside the block", bucketSeriesChunks, func(k []byte) []byte { return k }, other, rollUp, "outside the chunk's block"},
		{"garbage rollup chunk, merging", bucketSeriesRollups, rollupKeyOf, []byte{1, 9, 1}, rollUp,
			"series_rollups key 00000001000000020101"},
		{"garbage rollup chunk, reading", bucketSeriesRollups, rollupKeyOf, []byte{1, 9, 1},
			func(ctx context.Context, s *Store) error {
				_, err := s.SeriesRollups(ctx, series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}, time.Time{}, time.Time{})
				return err
			}, `series_rollups key 0000000100000002`},
		{"garbage rollup chunk, deleting", bucketSeriesRollups, rollupKeyOf, []byte{3},
			func(ctx context.Context, s *Store) error {
				_, err := s.DeleteSeriesRollupsBefore(ctx, block.Add(30*24*time.Hour))
				return err
			}, `series_rollups key 0000000100000002`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testnet.Ctx(t, 30*time.Second)
			s, _ := openTemp(t)
			if _, err := s.AppendReports(ctx, handSeries(block)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CompactSeries(ctx, block.Add(SeriesBlock)); err != nil {
				t.Fatal(err)
			}
			err := s.db.Update(func(tx *bolt.Tx) error {
				k, _ := tx.Bucket(bucketSeriesChunks).Cursor().First()
				return tx.Bucket(tt.bucket).Put(tt.key(k), tt.val)
			})
			if err != nil {
				t.Fatal(err)
			}
			var badKey []byte
			err = s.db.View(func(tx *bolt.Tx) error {
				k, _ := tx.Bucket(bucketSeriesChunks).Cursor().First()
				badKey = bytes.Clone(tt.key(k))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.call(ctx, s)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant ErrCorrupt naming %q", err, tt.want)
			}
			if !strings.HasPrefix(tt.name, "garbage rollup chunk, reading") && !strings.HasPrefix(tt.name, "garbage rollup chunk, deleting") {
				// A pass: the bad value is in quarantine, out of its
				// bucket, and the rest rolled up (a second pass finds
				// nothing to move or roll).
				_ = s.db.View(func(tx *bolt.Tx) error {
					qk := append(append(bytes.Clone(tt.bucket), sep), badKey...)
					if got := tx.Bucket(bucketSeriesQuarantine).Get(qk); !bytes.Equal(got, tt.val) {
						t.Errorf("quarantine %x = %x, want %x", qk, got, tt.val)
					}
					if strings.HasPrefix(tt.name, "garbage rollup") {
						return nil // a new rollup chunk took its key
					}
					if got := tx.Bucket(tt.bucket).Get(badKey); got != nil {
						t.Errorf("%s still holds %x", tt.bucket, badKey)
					}
					return nil
				})
				c, err := s.RollUpSeries(ctx, t0.Truncate(SeriesBlock).Add(SeriesBlock), 0)
				if err != nil || c.Chunks != 0 || len(c.Quarantined) != 0 || !c.Done {
					t.Errorf("second pass: %+v, %v; want nothing left", c, err)
				}
			}
		})
	}
}

// rollUp runs a pass and returns its error or else its quarantined
// chunks' reasons.
func rollUp(ctx context.Context, s *Store) error {
	c, err := s.RollUpSeries(ctx, t0.Truncate(SeriesBlock).Add(SeriesBlock), 0)
	if err != nil {
		return err
	}
	if c.Chunks == 0 {
		return errors.New("nothing rolled up beside the bad chunk")
	}
	return errors.Join(c.Quarantined...)
}

// rollupKeyOf is the rollup chunk key of raw chunk key k.
func rollupKeyOf(k []byte) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(k[:10]), uint64(rollupBlockOf(int64(binary.BigEndian.Uint64(k[10:])))))
}

func TestDeleteSeriesRollupsBefore(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	block := t0.Truncate(SeriesBlock)
	if _, err := s.AppendReports(ctx, handSeries(block)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RollUpSeries(ctx, block.Add(SeriesBlock), 0); err != nil {
		t.Fatal(err)
	}
	day := time.Unix(0, rollupBlockOf(block.UnixNano())).UTC()
	for _, tt := range []struct {
		name   string
		cutoff time.Time
		want   int
	}{
		{"the day has not ended by the cutoff", day.Add(SeriesRollupBlock - time.Nanosecond), 0},
		{"the day ended at the cutoff", day.Add(SeriesRollupBlock), 3},
		{"again: nothing left", day.Add(40 * SeriesRollupBlock), 0},
	} {
		n, err := s.DeleteSeriesRollupsBefore(ctx, tt.cutoff)
		if err != nil || n != tt.want {
			t.Errorf("%s: deleted %d points, %v; want %d", tt.name, n, err, tt.want)
		}
	}
	if left := dump(t, s, bucketSeriesRollups); len(left) != 0 {
		t.Errorf("%d rollup chunks left", len(left))
	}
}

// TestListSeriesRollups pages through a series whose first hours are
// rolled up: rollups first, then samples, each once, at every page size.
func TestListSeriesRollups(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	m := newMesh(2, 2, t0.Truncate(SeriesBlock))
	periods := int(7 * time.Hour / m.period)
	fill(t, ctx, s, m, 0, periods, 60, true)
	end := m.start.Add(time.Duration(periods) * m.period)
	// Four hours rolled up; three raw.
	if _, err := s.RollUpSeries(ctx, m.start.Add(4*time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	key := series.Key{Src: "node-000", Dst: "node-001", Path: pod2pod, Kind: tcp}
	wantR, err := s.SeriesRollups(ctx, key, time.Time{}, time.Time{})
	if err != nil || len(wantR) != 4 {
		t.Fatalf("%d rollups, %v", len(wantR), err)
	}
	wantS, err := s.Series(ctx, key, time.Time{}, time.Time{})
	if err != nil || len(wantS) != 3*360 {
		t.Fatalf("%d samples, %v", len(wantS), err)
	}
	for _, size := range []int{1, 3, 4, 5, 700, 2000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var got SeriesPage
			token := ""
			for pages := 0; ; pages++ {
				page, next, err := s.ListSeries(ctx, key, m.start.Add(-time.Minute), end, end, size, token)
				if err != nil || pages > 2000 {
					t.Fatalf("page %d: %v", pages, err)
				}
				if next != "" && page.Len() != size {
					t.Fatalf("page %d: %d items and a next page, want %d", pages, page.Len(), size)
				}
				if len(page.Rollups) > 0 && len(got.Samples) > 0 {
					t.Fatalf("page %d: rollups after samples", pages)
				}
				got.Rollups, got.Samples = append(got.Rollups, page.Rollups...), append(got.Samples, page.Samples...)
				if token = next; token == "" {
					break
				}
			}
			if diff := cmp.Diff(SeriesPage{wantR, wantS}, got, timeEq); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
}
