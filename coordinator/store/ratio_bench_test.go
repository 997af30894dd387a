package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
)

// fleetShape is FleetReports(nodes, paths, kinds) of the fleet's node
// names (deploy/fleet's NodeName).
func fleetShape(nodes, paths, kinds int) []series.Report {
	return FleetReports(nodes, paths, kinds, func(i int) string { return fmt.Sprintf("sim-%05d", i) })
}

// BenchmarkRawRatioFleet runs RawRatio's two sides (timeStore, timeRaw)
// once per iteration on the fleet's report shapes, each on new files, and
// reports raw_bbolt_ratio over the iterations of this run (the fastest of
// each side, as RawRatio takes, and the sums), with AppendReports'
// throughput.
func BenchmarkRawRatioFleet(b *testing.B) {
	for _, nodes := range []int{1000, 300} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			ctx := testnet.Ctx(b, 10*time.Minute)
			reports := fleetShape(nodes, 2, 2)
			summaries := 0
			for i := range reports {
				summaries += len(reports[i].Summaries)
			}
			dir := b.TempDir()
			var sumStore, sumRaw, minStore, minRaw time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ts, keys, vals, err := timeStore(ctx, dir, reports, 1000)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				tr, err := timeRaw(dir, keys, vals)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				sumStore, sumRaw = sumStore+ts, sumRaw+tr
				if i == 0 || ts < minStore {
					minStore = ts
				}
				if i == 0 || tr < minRaw {
					minRaw = tr
				}
			}
			b.StopTimer()
			b.ReportMetric(minRaw.Seconds()/minStore.Seconds(), "raw_bbolt_ratio")
			b.ReportMetric(sumRaw.Seconds()/sumStore.Seconds(), "mean_ratio")
			b.ReportMetric(float64(minStore.Microseconds())/1e3, "append_min_ms")
			b.ReportMetric(float64(minRaw.Microseconds())/1e3, "raw_min_ms")
			b.ReportMetric(float64(summaries)/minStore.Seconds(), "summaries/s")
		})
	}
}

// BenchmarkAppendFleet1000 is AppendReports alone on the 1,000-node
// shape (250 reports of 3,996 summaries), each iteration into a new
// store as RawRatio's: for profiling.
func BenchmarkAppendFleet1000(b *testing.B) {
	ctx := testnet.Ctx(b, 10*time.Minute)
	reports := fleetShape(1000, 2, 2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, _ := openTemp(b)
		b.StartTimer()
		if _, err := s.AppendReports(ctx, reports); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkEncodeHeadFleet encodes one report of the 1,000-node shape
// (3,996 summaries), its entries sorted.
func BenchmarkEncodeHeadFleet(b *testing.B) {
	r := fleetShape(1000, 2, 2)[0]
	entries := make([]headEntry, len(r.Summaries))
	for j := range r.Summaries {
		entries[j] = headEntry{dst: uint32(j/4 + 1), pk: pathKind(&r.Summaries[j]), j: int32(j)}
	}
	var v []byte
	for b.Loop() {
		v = encodeHead(make([]byte, 0, headCap(len(entries))), r.Start, r.Period, r.Summaries, entries)
	}
	b.ReportMetric(float64(len(v))/float64(len(entries)), "bytes/summary")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/summary")
}
