package remotewrite

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var _ runs.Observer = (*Writer)(nil)

// nodeKey is one node series: node, role, test and path.
type nodeKey struct {
	node, role string
	test       measurev1.Test
	path       measurev1.Path
}

// nodeAgg is a node series' figures within one run.
type nodeAgg struct {
	vs         []float64
	ts         int64 // the newest result's start, Unix ms
	higherBest bool
}

// runAggs are the node figures of the runs in progress.
type runAggs struct {
	mu   sync.Mutex
	runs map[string]map[nodeKey]*nodeAgg // by run ID; only runs started
}

// RunStarted starts collecting runID's node figures.
func (w *Writer) RunStarted(runID string) {
	w.aggs.mu.Lock()
	defer w.aggs.mu.Unlock()
	if w.aggs.runs == nil {
		w.aggs.runs = map[string]map[nodeKey]*nodeAgg{}
	}
	w.aggs.runs[runID] = map[nodeKey]*nodeAgg{}
}

// RunEnded queues runID's node samples: per node, role, test and path the
// median of the run's pair figures, at the newest result's start time.
func (w *Writer) RunEnded(runID string, _ measurev1.RunState) {
	w.aggs.mu.Lock()
	nodes := w.aggs.runs[runID]
	delete(w.aggs.runs, runID)
	w.aggs.mu.Unlock()
	if len(nodes) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(nodes), func(x, y nodeKey) int {
		return cmp.Or(cmp.Compare(x.test, y.test), cmp.Compare(x.path, y.path), cmp.Compare(x.node, y.node), cmp.Compare(x.role, y.role))
	})
	w.add(func(q *queue, push func(sample)) {
		for _, k := range keys {
			a := nodes[k]
			fam := famNodeLatency
			if a.higherBest {
				fam = famNodeThroughput
			}
			push(sample{ts: a.ts, v: stats.Median(a.vs), a: q.intern(k.node), b: q.intern(k.role),
				test: q.intern16(testspec.Name(k.test)), path: q.intern16(testspec.PathName(k.path)), fam: fam})
		}
	})
}

// Recorded queues each measurement's headline (testcell.Measured: OK,
// finite, not negative) as a pair sample at the result's start time (now
// if it has none), and
// keeps it for its run's node samples (RunEnded) if the run was started.
// Other results are skipped.
func (w *Writer) Recorded(results []*measurev1.Result) {
	type pairResult struct {
		r  *measurev1.Result
		v  float64
		ts int64
	}
	pairs := make([]pairResult, 0, len(results))
	now := time.Now().UnixMilli()
	for _, r := range results {
		if v, ok := testcell.Measured(r); ok {
			ts := now // no start time: when it was recorded
			if r.GetStartTime() != nil {
				ts = r.GetStartTime().AsTime().UnixMilli()
			}
			pairs = append(pairs, pairResult{r: r, v: v, ts: ts})
		}
	}
	if len(pairs) == 0 {
		return
	}
	w.aggs.mu.Lock()
	for _, p := range pairs {
		nodes := w.aggs.runs[p.r.GetRunId()]
		if nodes == nil {
			continue // a late result, or a run not seen starting
		}
		test, path := p.r.GetSpec().GetTest(), p.r.GetPath()
		keep := func(k nodeKey) {
			a := nodes[k]
			if a == nil {
				a = &nodeAgg{higherBest: testcell.HigherIsBetter(test)}
				nodes[k] = a
			}
			a.vs = append(a.vs, p.v)
			a.ts = max(a.ts, p.ts)
		}
		for _, e := range testspec.DestOf(p.r).Ends(p.r.GetSrcNode()) { // a target is no node: src alone
			keep(nodeKey{e.Node, e.Role, test, path})
		}
	}
	w.aggs.mu.Unlock()
	w.add(func(q *queue, push func(sample)) {
		for _, p := range pairs {
			fam := famPairLatency
			if testcell.HigherIsBetter(p.r.GetSpec().GetTest()) {
				fam = famPairThroughput
			}
			push(sample{ts: p.ts, v: p.v, a: q.intern(p.r.GetSrcNode()), b: q.intern(p.r.GetDstNode()),
				test: q.intern16(testspec.Name(p.r.GetSpec().GetTest())), path: q.intern16(testspec.PathName(p.r.GetPath())), fam: fam})
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
				base := sample{ts: ts, a: src, b: q.intern(s.Dst), test: q.intern16(testspec.ProbeTestName(s.Kind)),
					path: q.intern16(testspec.PathName(s.Path))}
				loss := base
				loss.fam, loss.v = famPairLoss, stats.LossRatio(uint64(s.Sent), uint64(s.Received))
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
