package store

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/internal/testnet"
)

// TestSeriesRollupBytesPerPoint measures the file's bytes per hourly
// rollup point in the steady state: two days of a 5 x 8 node mesh (160
// series, 10 s periods), each 2 h block compacted and then rolled up as
// soon as it ended (the worst case: every pass rewrites each series'
// rollup chunk of the day), then the file compacted (bbolt.Compact) to
// count its pages without the freed raw pages. It fails over 14 bytes a
// point in use, or 20 of pages in the live file (bbolt splits pages
// half full).
func TestSeriesRollupBytesPerPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("two days of a mesh")
	}
	ctx := testnet.Ctx(t, 5*time.Minute)
	s, _ := openTemp(t)
	m := newMesh(5, 8, time.Unix(0, rollupBlockOf(t0.UnixNano())).UTC())
	perBlock := int(SeriesBlock / m.period)
	for b := 0; b < 24; b++ {
		fill(t, ctx, s, m, b*perBlock, (b+1)*perBlock, 60, true)
		if _, err := s.RollUpSeries(ctx, m.start.Add(time.Duration(b+1)*SeriesBlock), 0); err != nil {
			t.Fatal(err)
		}
	}
	points := int64(5 * 8 * 4 * 48)
	pages := func(db *bolt.DB) (inuse, alloc int64, keys int) {
		err := db.View(func(tx *bolt.Tx) error {
			st := tx.Bucket(bucketSeriesRollups).Stats()
			inuse, alloc, keys = int64(st.BranchInuse+st.LeafInuse), int64(st.BranchAlloc+st.LeafAlloc), st.KeyN
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return inuse, alloc, keys
	}
	inuse, alloc, keys := pages(s.db)
	if keys != 5*8*4*2 {
		t.Fatalf("%d rollup chunks, want %d (a series a day)", keys, 5*8*4*2)
	}
	c, err := s.SeriesStats(ctx)
	if err != nil || c.ChunkSamples != 0 || c.HeadSamples != 0 {
		t.Fatalf("raw data left: %+v, %v", c, err)
	}
	dst, err := bolt.Open(filepath.Join(t.TempDir(), "compact.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	if err := bolt.Compact(dst, s.db, 1<<24); err != nil {
		t.Fatal(err)
	}
	cInuse, cAlloc, _ := pages(dst)
	var size int64
	if err := dst.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d points in %d chunks: live file %.2f bytes/point in use, %.2f allocated; compacted %.2f in use, %.2f allocated; whole compacted file %d bytes (%.2f/point, node names and meta pages included)",
		points, keys, float64(inuse)/float64(points), float64(alloc)/float64(points),
		float64(cInuse)/float64(points), float64(cAlloc)/float64(points), size, float64(size)/float64(points))
	if per := float64(cInuse) / float64(points); per > 14 {
		t.Errorf("%.2f bytes in use per point, want <= 14", per)
	}
	if per := float64(alloc) / float64(points); per > 20 {
		t.Errorf("%.2f bytes of the live file's pages per point, want <= 20", per)
	}
}

// BenchmarkRollUpSeries times RollUpSeries over 4 hours of a 10 x 10
// node mesh (400 series, 800 chunks, 576,000 samples at 10 s) from a
// fresh copy of the file each time: decode, fold, write the rollup
// chunks, delete the raw ones, commit.
func BenchmarkRollUpSeries(b *testing.B) {
	ctx := testnet.Ctx(b, 10*time.Minute)
	s, template := openTemp(b)
	m := newMesh(10, 10, time.Unix(0, rollupBlockOf(t0.UnixNano())).UTC())
	periods := int(4 * time.Hour / m.period)
	fill(b, ctx, s, m, 0, periods, 60, true)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	cutoff := m.start.Add(4 * time.Hour)
	var c SeriesRollupCounts
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := reopen(b, copyFile(b, template))
		b.StartTimer()
		var err error
		if c, err = s.RollUpSeries(ctx, cutoff, 0); err != nil || c.Samples != 400*periods {
			b.Fatalf("%+v, %v", c, err)
		}
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.Samples), "ns/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.Points), "ns/point")
	b.ReportMetric(float64(c.Batches), "batches")
}
