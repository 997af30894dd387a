package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// pairPaths are the continuous probes' paths the pair page draws,
// host-host (the baseline) first.
var pairPaths = []measurev1.Path{
	measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD, measurev1.Path_PATH_HOST_TO_POD,
	measurev1.Path_PATH_HOST_TO_SERVICE, measurev1.Path_PATH_POD_TO_SERVICE,
}

// steps are the pair chart's bucket widths by range: one point per
// bucket, raw periods and hourly rollups alike folded into the same grid,
// so that the line goes on without a seam where the rollups end. Ranges
// that reach rollups (7d, 30d) have buckets of an hour or more.
var steps = map[string]time.Duration{"1h": 10 * time.Second, "24h": 5 * time.Minute, "7d": time.Hour, "30d": 3 * time.Hour}

// maxOnDemand bounds the on-demand results listed under the chart.
const maxOnDemand = 100

// onDemandSlices and maxOnDemandRead bound what onDemand reads: the range
// in slices read newest first until maxOnDemand are found, and at most
// that many results of clients' runs in all. The store skips the
// monitor's results (a pair it measured every few seconds holds hundreds
// of thousands) at the cost of reading their run ID and each run's
// header once (docs/performance.md).
const (
	onDemandSlices  = 30
	maxOnDemandRead = 20000
)

// seriesView is one path's points, flat arrays of one entry per bucket
// that holds data.
type seriesView struct {
	Path string `json:"path"`
	// T is each bucket's start, Unix seconds.
	T []int64 `json:"t"`
	// Median and P90 are the RTT (s): the medians and p90s of the
	// bucket's periods and hours, weighted by their answered probes.
	Median []fig `json:"median"`
	P90    []fig `json:"p90"`
	// Loss is 1 - received/sent over the bucket, 0..1.
	Loss []fig `json:"loss"`
	// Sent counts the probes sent in the bucket.
	Sent []uint64 `json:"sent"`
	// Rollup marks buckets made (partly) of hourly rollups.
	Rollup []bool `json:"rollup"`
}

// pointIn is one input of a bucket: a raw period or an hourly rollup.
type pointIn struct {
	start          time.Time
	sent, received uint64
	median, p90    float64
	rollup         bool
}

// bucket folds the points of one bucket.
type bucket struct {
	sent, received uint64
	medians, p90s  []stats.Weighted
	rollup         bool
}

// pointsOf appends a page of a series' hourly rollups and raw samples to
// in, as points: the page's protos are not kept.
func pointsOf(in []pointIn, rollups []*meshv1.ProbeRollup, samples []*meshv1.ProbeSample) []pointIn {
	for _, r := range rollups {
		in = append(in, pointIn{start: r.GetBucketStart().AsTime(), sent: r.GetSent(), received: r.GetReceived(),
			median: r.GetRttMedianSeconds(), p90: r.GetRttP90Seconds(), rollup: true})
	}
	for _, s := range samples {
		in = append(in, pointIn{start: s.GetPeriodStart().AsTime(), sent: uint64(s.GetSent()), received: uint64(s.GetReceived()),
			median: s.GetRttMedianSeconds(), p90: s.GetRttP90Seconds()})
	}
	return in
}

// mergeSeries folds a series' points (pointsOf: hourly rollups and raw
// samples) into buckets of step from start. The store keeps every report period either
// raw or in its hour's rollup, never both (retention rolls up whole
// chunks, which need not end on the hour), so both are folded in as they
// are: an hour partly rolled up and partly raw is one bucket whose counts
// are the sum, and nothing counts twice. step must be at least an hour
// when there are rollups (UI.pair sees to it), so that the line has no gap
// where the rollups end.
func mergeSeries(path measurev1.Path, in []pointIn, start time.Time, step time.Duration) seriesView {
	buckets := map[int64]*bucket{}
	var keys []int64
	for _, p := range in {
		k := int64(math.Floor(float64(p.start.Sub(start)) / float64(step)))
		b := buckets[k]
		if b == nil {
			b = &bucket{}
			buckets[k] = b
			keys = append(keys, k)
		}
		b.sent += p.sent
		b.received += min(p.received, p.sent)
		b.rollup = b.rollup || p.rollup
		if p.received > 0 {
			b.medians = append(b.medians, stats.Weighted{V: p.median, W: p.received})
			b.p90s = append(b.p90s, stats.Weighted{V: p.p90, W: p.received})
		}
	}
	slices.Sort(keys)
	v := seriesView{Path: testspec.PathName(path), T: []int64{}, Median: []fig{}, P90: []fig{}, Loss: []fig{}, Sent: []uint64{}, Rollup: []bool{}}
	for _, k := range keys {
		b := buckets[k]
		loss := none
		if b.sent > 0 {
			loss = fig(stats.LossRatio(b.sent, b.received))
		}
		v.T = append(v.T, start.Add(time.Duration(k)*step).Unix())
		v.Median = append(v.Median, fig(stats.WeightedQuantile(b.medians, 0.5)))
		v.P90 = append(v.P90, fig(stats.WeightedQuantile(b.p90s, 0.5)))
		v.Loss = append(v.Loss, loss)
		v.Sent = append(v.Sent, b.sent)
		v.Rollup = append(v.Rollup, b.rollup)
	}
	return v
}

// onDemandView is one on-demand result of the pair.
type onDemandView struct {
	RunID  string `json:"run_id"`
	Time   string `json:"time"`
	Test   string `json:"test"`
	Path   string `json:"path"`
	Value  fig    `json:"value"`
	Unit   string `json:"unit"`
	Status string `json:"status"`
}

func (u *UI) apiPair(r *http.Request) (any, error) {
	q, err := parseQuery(r.URL.RawQuery, "src", "dst", "range", "kind")
	if err != nil {
		return nil, err
	}
	if err := q.require("src", "dst"); err != nil {
		return nil, err
	}
	kindName := "icmp"
	if k := r.URL.Query().Get("kind"); k != "" {
		kindName = k
	}
	kind, ok := testspec.ParseProbeKind(kindName)
	if !ok {
		return nil, &paramError{name: "kind", value: kindName, want: "want icmp, icmp_mtu, tcp or http"}
	}
	// Tabs polling the same pair share a read, and at most maxPairReads
	// pairs are read at once: a week of 1 s periods on five paths is
	// millions of points.
	return u.sharedRead(r.Context(), "pair\x00"+q.src+"\x00"+q.dst+"\x00"+q.rangeName+"\x00"+kindName, u.pairReads,
		func(ctx context.Context) (any, error) { return u.pair(ctx, q.src, q.dst, q.rangeName, kindName, kind) })
}

// maxPairReads bounds the pair charts' reads that run at once.
const maxPairReads = 2

func (u *UI) pair(ctx context.Context, src, dst, rangeName, kindName string, kind measurev1.ProbeKind) (any, error) {
	span, step := ranges[rangeName], steps[rangeName]
	end := u.cfg.Now().UTC()
	start := end.Add(-span).Truncate(step)
	type fetched struct {
		path   measurev1.Path
		points []pointIn
	}
	var got []fetched
	anyRollup := false
	for _, p := range pairPaths {
		req := &meshv1.ListProbeSeriesRequest{SrcNode: src, DstNode: dst, Path: p, Kind: kind,
			StartTime: timestamppb.New(start), EndTime: timestamppb.New(end), PageSize: 20000}
		f := fetched{path: p}
		for {
			resp, err := u.cfg.Source.ListProbeSeries(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("list probe series %s: %w", testspec.PathName(p), err)
			}
			f.points = pointsOf(f.points, resp.GetRollups(), resp.GetSamples())
			anyRollup = anyRollup || len(resp.GetRollups()) > 0
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" || len(resp.GetSamples())+len(resp.GetRollups()) == 0 {
				break
			}
		}
		if len(f.points) > 0 {
			got = append(got, f)
		}
	}
	if anyRollup && step < time.Hour {
		step = time.Hour
		start = start.Truncate(step)
	}
	series := []seriesView{}
	for _, f := range got {
		series = append(series, mergeSeries(f.path, f.points, start, step))
	}
	od, err := u.onDemand(ctx, src, dst, start, end)
	if err != nil {
		return nil, err
	}
	return map[string]any{"src": src, "dst": dst, "range": rangeName, "kind": kindName, "start": start.Unix(), "end": end.Unix(),
		"step_seconds": step.Seconds(), "series": series, "ondemand": od, "refresh_seconds": u.cfg.RefreshInterval.Seconds()}, nil
}

// onDemand lists the newest results of the pair in [start, end) from the
// clients' runs (RUN_ORIGIN_CLIENT: not the monitor's, however old the
// run), newest first: at most maxOnDemand, read slice by slice from the
// end of the range (a slice too dense to read in an eighth of
// maxOnDemandRead is halved and read again, so the newest are never
// skipped) and no further once maxOnDemandRead results were read.
func (u *UI) onDemand(ctx context.Context, src, dst string, start, end time.Time) ([]onDemandView, error) {
	out := []onDemandView{}
	slice := max(end.Sub(start)/onDemandSlices, time.Second)
	read := 0
	for to := end; to.After(start) && len(out) < maxOnDemand && read < maxOnDemandRead; {
		from := to.Add(-slice)
		if from.Before(start) {
			from = start
		}
		limit := min(maxOnDemandRead/8, maxOnDemandRead-read)
		results, err := u.results(ctx, &meshv1.ListResultsRequest{SrcNode: src, DstNode: dst, StartTime: timestamppb.New(from), EndTime: timestamppb.New(to),
			Origin: measurev1.RunOrigin_RUN_ORIGIN_CLIENT}, limit)
		if err != nil {
			return nil, err
		}
		read += len(results)
		if len(results) >= limit && slice > time.Second {
			// Cut: the slice's newest results were not read. Read a
			// shorter slice ending at the same time.
			slice /= 2
			continue
		}
		out = appendOnDemand(out, results)
		to = from
	}
	return out, nil
}

// appendOnDemand appends to out the results (of clients' runs),
// newest first, until out holds maxOnDemand.
func appendOnDemand(out []onDemandView, results []*measurev1.Result) []onDemandView {
	for i := len(results) - 1; i >= 0 && len(out) < maxOnDemand; i-- {
		res := results[i]
		v := onDemandView{RunID: res.GetRunId(), Test: testspec.Name(res.GetSpec().GetTest()), Path: testspec.PathName(res.GetPath()),
			Unit: testcell.Unit(res.GetSpec().GetTest()), Status: testspec.StatusName(testcell.StatusOf(res)), Value: none}
		if t := res.GetStartTime(); t != nil {
			v.Time = t.AsTime().UTC().Format(time.RFC3339)
		}
		if f, ok := testcell.Measured(res); ok {
			v.Value = fig(f)
		}
		out = append(out, v)
	}
	return out
}
