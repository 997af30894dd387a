package remotewrite

import (
	"slices"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Roles of the node series' role label, as in coordinator/metrics.
const (
	roleSrc = "src"
	roleDst = "dst"
)

var _ runs.Observer = (*Writer)(nil)

// RunStarted does nothing: runs have no series here.
func (w *Writer) RunStarted(string) {}

// RunEnded does nothing: runs have no series here.
func (w *Writer) RunEnded(string, measurev1.RunState) {}

// pairResult is one OK result's headline.
type pairResult struct {
	src, dst   string
	test       measurev1.Test
	path       measurev1.Path
	v          float64
	tsMillis   int64
	higherBest bool
}

// Recorded queues each measurement's headline (report.Measured: OK, finite,
// not negative) as a pair sample at the result's start time, and per node
// and role the median of the batch's pair figures at the batch's latest
// start time. Other results are skipped.
func (w *Writer) Recorded(results []*measurev1.Result) {
	pairs := make([]pairResult, 0, len(results))
	for _, r := range results {
		v, ok := report.Measured(r)
		if !ok {
			continue
		}
		test := r.GetSpec().GetTest()
		pairs = append(pairs, pairResult{src: r.GetSrcNode(), dst: r.GetDstNode(), test: test, path: r.GetPath(), v: v,
			tsMillis: r.GetStartTime().AsTime().UnixMilli(), higherBest: report.HigherIsBetter(test)})
	}
	if len(pairs) == 0 {
		return
	}
	type nodeKey struct {
		node, role string
		test       measurev1.Test
		path       measurev1.Path
	}
	type nodeAgg struct {
		vs         []float64
		ts         int64
		higherBest bool
	}
	nodes := map[nodeKey]*nodeAgg{}
	var order []nodeKey
	aggOf := func(k nodeKey, p pairResult) {
		a := nodes[k]
		if a == nil {
			a = &nodeAgg{higherBest: p.higherBest}
			nodes[k] = a
			order = append(order, k)
		}
		a.vs = append(a.vs, p.v)
		a.ts = max(a.ts, p.tsMillis)
	}
	for _, p := range pairs {
		aggOf(nodeKey{p.src, roleSrc, p.test, p.path}, p)
		if !testspec.IsExternal(p.path) { // dst is a target's name, no node
			aggOf(nodeKey{p.dst, roleDst, p.test, p.path}, p)
		}
	}
	w.add(func(q *queue, push func(sample)) {
		for _, p := range pairs {
			fam := famPairLatency
			if p.higherBest {
				fam = famPairThroughput
			}
			push(sample{ts: p.tsMillis, v: p.v, a: q.intern(p.src), b: q.intern(p.dst),
				test: q.intern16(testspec.Name(p.test)), path: q.intern16(testspec.PathName(p.path)), fam: fam})
		}
		for _, k := range order {
			a := nodes[k]
			fam := famNodeLatency
			if a.higherBest {
				fam = famNodeThroughput
			}
			push(sample{ts: a.ts, v: median(a.vs), a: q.intern(k.node), b: q.intern(k.role),
				test: q.intern16(testspec.Name(k.test)), path: q.intern16(testspec.PathName(k.path)), fam: fam})
		}
	})
}

// Reports queues the stored probe reports' summaries: per summary with a
// probe sent, its loss ratio, and when one probe came back its RTT median
// and p90 in seconds, at the period start. Summaries whose figures failed
// the checks (STATUS_INVALID) are skipped.
func (w *Writer) Reports(reports []series.Report) {
	w.add(func(q *queue, push func(sample)) {
		for _, r := range reports {
			ts := r.Start.UnixMilli()
			src := q.intern(r.Src)
			for _, s := range r.Summaries {
				if s.Sent == 0 || s.Status == measurev1.Status_STATUS_INVALID || s.Received > s.Sent {
					continue
				}
				base := sample{ts: ts, a: src, b: q.intern(s.Dst), test: q.intern16("probe_" + diagnose.ProbeKindName(s.Kind)),
					path: q.intern16(testspec.PathName(s.Path))}
				loss := base
				loss.fam, loss.v = famPairLoss, float64(s.Sent-s.Received)/float64(s.Sent)
				push(loss)
				if s.Received == 0 {
					continue
				}
				med, p90 := base, base
				med.fam, med.quantile, med.v = famPairLatency, quantileMedian, seconds(s.RTTMedian)
				p90.fam, p90.quantile, p90.v = famPairLatency, quantileP90, seconds(s.RTTP90)
				push(med)
				push(p90)
			}
		}
	})
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// median is the median of vs (sorted in place); vs is not empty.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}
