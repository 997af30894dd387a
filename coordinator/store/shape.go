package store

import (
	"math/rand/v2"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// FleetReports are probe reports shaped like a fleet's of nodes nodes
// (named by name, 0..nodes-1), for RawRatio and the store's benchmarks:
// about a million summaries in at most 2,000 reports, the nodes reporting
// in turn every 10 s from an hour ago, each report of nodes-1 peers x
// paths x kinds (FleetSummaries). The same arguments give the same
// reports but for the start time.
func FleetReports(nodes, paths, kinds int, name func(i int) string) []series.Report {
	per := (nodes - 1) * paths * kinds
	n := min(max(1_000_000/per, 1), 2000)
	out := make([]series.Report, n)
	start := time.Now().Add(-time.Hour)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range out {
		out[i] = series.Report{Src: name(i % nodes), Seq: uint64(i/nodes + 1), Start: start.Add(time.Duration(i/nodes) * 10 * time.Second),
			Period: 10 * time.Second, Summaries: FleetSummaries(i%nodes, nodes, paths, kinds, name, rng)}
	}
	return out
}

// FleetSummaries are node src's summaries of one period to every other
// node of a fleet of nodes (named by name) x paths x kinds (the first
// paths Path values and kinds ProbeKind values): one probe each, every
// one answered, RTTs around 100 us with a spread drawn from rng.
func FleetSummaries(src, nodes, paths, kinds int, name func(i int) string, rng *rand.Rand) []series.Summary {
	out := make([]series.Summary, 0, (nodes-1)*paths*kinds)
	for d := range nodes {
		if d == src {
			continue
		}
		for p := range paths {
			for k := range kinds {
				med := time.Duration(90_000 + rng.IntN(20_000))
				lo, hi := med-time.Duration(rng.IntN(10_000)), med+time.Duration(rng.IntN(20_000))
				out = append(out, series.Summary{Dst: name(d), Path: measurev1.Path(p + 1), Kind: measurev1.ProbeKind(k + 1),
					Sent: 1, Received: 1, RTTMin: lo, RTTMedian: med, RTTP90: hi, RTTMax: hi + time.Duration(rng.IntN(20_000)),
					Status: measurev1.Status_STATUS_OK})
			}
		}
	}
	return out
}
