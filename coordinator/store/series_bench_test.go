package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
)

// fill appends periods [from, to) of m to s, periodsPerCall periods per
// AppendReports (the caller's group commit), compacting at every block
// boundary as a coordinator would.
func fill(tb testing.TB, ctx context.Context, s *Store, m *mesh, from, to, periodsPerCall int, compact bool) {
	tb.Helper()
	perBlock := int(SeriesBlock / m.period)
	var batch []series.Report
	for i := from; i < to; i++ {
		batch = append(batch, m.reports(i)...)
		if (i+1)%periodsPerCall == 0 || i == to-1 {
			if _, err := s.AppendReports(ctx, batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
		if compact && (i+1)%perBlock == 0 {
			if _, err := s.CompactSeries(ctx, m.start.Add(time.Duration(i+1)*m.period)); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// TestSeriesBytesPerSample measures the bbolt file's bytes per stored
// sample after a day of a 10 x 20 node mesh (2 paths, 2 kinds, 10 s
// periods: 6.9 million samples), compacted block by block. It fails
// over 16 bytes a sample.
func TestSeriesBytesPerSample(t *testing.T) {
	if testing.Short() {
		t.Skip("a day of a mesh")
	}
	ctx := testnet.Ctx(t, 2*time.Minute)
	s, _ := openTemp(t)
	m := newMesh(10, 20, t0.Truncate(SeriesBlock))
	day := int(24 * time.Hour / m.period)
	fill(t, ctx, s, m, 0, day, 60, true)
	st, err := s.SeriesStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(10 * 20 * 4 * day); st.Samples != want || st.HeadReports != 0 {
		t.Fatalf("stats %+v, want %d samples, none in the head", st, want)
	}
	file, data := float64(st.FileBytes)/float64(st.Samples), float64(st.DataBytes)/float64(st.Samples)
	t.Logf("%d samples in %d chunks: file %d bytes (%.2f bytes/sample), pages %d bytes (%.2f bytes/sample)",
		st.Samples, st.Chunks, st.FileBytes, file, st.DataBytes, data)
	if file > 16 {
		t.Errorf("%.2f file bytes per sample, want <= 16", file)
	}
}

// BenchmarkSeriesQuery24h times Series for one pair's last 24 h: 12
// chunks and the head of the current block (90 minutes of reports).
func BenchmarkSeriesQuery24h(b *testing.B) {
	ctx := testnet.Ctx(b, 5*time.Minute)
	s, _ := openTemp(b)
	m := newMesh(10, 10, t0.Truncate(SeriesBlock))
	periods := int((24*time.Hour + 90*time.Minute) / m.period)
	fill(b, ctx, s, m, 0, periods, 60, true)
	end := m.start.Add(time.Duration(periods) * m.period)
	key := series.Key{Src: "node-003", Dst: "node-007", Path: pod2pod, Kind: tcp}
	st, err := s.SeriesStats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("store: %+v", st)
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		got, err := s.Series(ctx, key, end.Add(-24*time.Hour), end)
		times = append(times, time.Since(t))
		if err != nil || len(got) != 8640 {
			b.Fatalf("%d samples, %v", len(got), err)
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*99/100])/1e6, "p99_ms")
	b.ReportMetric(float64(times[len(times)/2])/1e6, "p50_ms")
}

// appendBatch is 1000 reports (100 agents, 10 periods each, 100
// destinations x 4 series: 400,000 summaries) ready for AppendReports;
// next renumbers them for the next round.
type appendBatch struct {
	m       *mesh
	reports []series.Report
	round   int
}

func newAppendBatch() *appendBatch {
	a := &appendBatch{m: newMesh(100, 100, t0)}
	for i := 0; i < 10; i++ {
		a.reports = append(a.reports, a.m.reports(i)...)
	}
	return a
}

func (a *appendBatch) next() {
	a.round++
	for i := range a.reports {
		a.reports[i].Seq += 10
		a.reports[i].Start = a.reports[i].Start.Add(10 * a.m.period)
	}
}

func (a *appendBatch) summaries() int { return len(a.reports) * len(a.reports[0].Summaries) }

// headRows are the head keys and values of seqs in [lo, hi).
func headRows(tb testing.TB, s *Store, lo, hi uint64) (keys, vals [][]byte) {
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSeriesHead).ForEach(func(k, v []byte) error {
			if seq := binary.BigEndian.Uint64(k[4:]); seq < lo || seq >= hi {
				return nil
			}
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	return keys, vals
}

// rawPut writes keys and vals to db in transactions of 1,000 keys.
func rawPut(tb testing.TB, db *bolt.DB, keys, vals [][]byte) {
	for i := 0; i < len(keys); i += 1000 {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists(bucketSeriesHead)
			if err != nil {
				return err
			}
			for j := i; j < min(i+1000, len(keys)); j++ {
				if err := bk.Put(keys[j], vals[j]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkAppendReports stores batches of 1,000 reports (400,000
// summaries) in one AppendReports each.
func BenchmarkAppendReports(b *testing.B) {
	ctx := testnet.Ctx(b, 10*time.Minute)
	s, _ := openTemp(b)
	a := newAppendBatch()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.AppendReports(ctx, a.reports); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		a.next()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*a.summaries())/b.Elapsed().Seconds(), "summaries/s")
}

// BenchmarkRawBoltBatch1000 writes the bytes AppendReports writes (the
// same head keys and values) straight to bbolt, 1,000 keys a transaction.
func BenchmarkRawBoltBatch1000(b *testing.B) {
	ctx := testnet.Ctx(b, 10*time.Minute)
	s, _ := openTemp(b)
	a := newAppendBatch()
	if _, err := s.AppendReports(ctx, a.reports); err != nil {
		b.Fatal(err)
	}
	keys, vals := headRows(b, s, 0, 1<<63)
	db := openRaw(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, k := range keys {
			k[11]++ // new seqs each round
		}
		b.StartTimer()
		rawPut(b, db, keys, vals)
	}
	b.ReportMetric(float64(b.N*a.summaries())/b.Elapsed().Seconds(), "summaries/s")
}

func openRaw(tb testing.TB) *bolt.DB {
	db, err := bolt.Open(filepath.Join(tb.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// BenchmarkAppendVsRawBolt runs both in turn on the same batches and
// reports raw_bbolt_ratio: AppendReports' throughput over raw bbolt's
// writing the same bytes in transactions of 1,000 keys (target >= 0.5).
func BenchmarkAppendVsRawBolt(b *testing.B) {
	ctx := testnet.Ctx(b, 10*time.Minute)
	s, _ := openTemp(b)
	db := openRaw(b)
	a := newAppendBatch()
	var tAppend, tRaw time.Duration
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if _, err := s.AppendReports(ctx, a.reports); err != nil {
			b.Fatal(err)
		}
		tAppend += time.Since(t)
		keys, vals := headRows(b, s, uint64(i*10+1), uint64(i*10+11)) // this round's
		t = time.Now()
		rawPut(b, db, keys, vals)
		tRaw += time.Since(t)
		a.next()
	}
	n := float64(b.N * a.summaries())
	b.ReportMetric(n/tAppend.Seconds(), "append_summaries/s")
	b.ReportMetric(n/tRaw.Seconds(), "raw_summaries/s")
	b.ReportMetric(tRaw.Seconds()/tAppend.Seconds(), "raw_bbolt_ratio")
}
