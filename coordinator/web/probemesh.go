package web

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Probes is the continuous mesh the UI shows: the agents' in-process
// probes, one report per node per report interval.
type Probes struct {
	// Kinds and Paths are the configured probe kinds and paths (the config
	// file's probes section); none means no continuous probes.
	Kinds []measurev1.ProbeKind
	// Paths are the paths probed.
	Paths []measurev1.Path
	// ReportInterval is the agents' report period; zero means 10 s.
	ReportInterval time.Duration
	// Latest returns each source node's newest stored report's summaries
	// of path and kind whose period ended at or after since
	// (store.Store.LatestSamples), at most limit (above that,
	// store.ErrLimit).
	Latest func(ctx context.Context, path measurev1.Path, kind measurev1.ProbeKind, since time.Time, limit int) ([]store.LatestSample, error)
	// Faults returns the faults the probes' judge published after the
	// last judged period (nil: none); nil means none.
	Faults func() []diagnose.Finding
}

// on reports whether p has probes to show.
func (p *Probes) on() bool {
	return p != nil && p.Latest != nil && len(p.Kinds) > 0 && len(p.Paths) > 0
}

// probeCache keeps the newest probe meshes a short while: every open
// mesh page polls at the report interval, and a view of 300 nodes
// decodes 90,000 summaries per path.
type probeCache struct {
	mu    sync.Mutex
	views map[[2]int32]probeCached
}

type probeCached struct {
	at time.Time
	v  *meshView
}

// probeMesh fills v (its Tests and Paths already listed) with the newest
// period of kind on path: per pair the median RTT of the probes, their
// loss, and the state against the host-host figure of the same pair and
// kind (for host-host, the matrix's median).
func (u *UI) probeMesh(ctx context.Context, v *meshView, kind measurev1.ProbeKind, path measurev1.Path) (*meshView, error) {
	p := u.cfg.Probes
	ri := p.ReportInterval
	if ri <= 0 {
		ri = 10 * time.Second
	}
	now := u.cfg.Now()
	key := [2]int32{int32(kind), int32(path)}
	u.probes.mu.Lock()
	if c, ok := u.probes.views[key]; ok && now.Sub(c.at) < ri/2 && now.Sub(c.at) >= 0 {
		u.probes.mu.Unlock()
		out := *c.v
		out.Tests, out.Paths = v.Tests, v.Paths
		return &out, nil
	}
	u.probes.mu.Unlock()
	// One rebuild at a time per kind and path, whoever asks.
	built, err := u.sharedRead(ctx, fmt.Sprintf("probes/%d/%d", kind, path), nil, func(ctx context.Context) (any, error) {
		return u.buildProbeMesh(ctx, *v, kind, path, now, key)
	})
	if err != nil {
		return nil, err
	}
	out := *built.(*meshView)
	out.Tests, out.Paths = v.Tests, v.Paths
	return &out, nil
}

// buildProbeMesh reads and fills the probe mesh of kind and path and
// caches it under key.
func (u *UI) buildProbeMesh(ctx context.Context, view meshView, kind measurev1.ProbeKind, path measurev1.Path, now time.Time, key [2]int32) (*meshView, error) {
	v := &view
	p := u.cfg.Probes
	ri := p.ReportInterval
	if ri <= 0 {
		ri = 10 * time.Second
	}
	since := now.Add(-ProbeFreshness(ri))
	read := func(path measurev1.Path) (map[[2]string]store.LatestSample, error) {
		got, err := p.Latest(ctx, path, kind, since, MaxMeshNodes*(MaxMeshNodes-1))
		if errors.Is(err, store.ErrLimit) {
			return nil, fmt.Errorf("%w: the newest probe period has more than %d pairs (a full mesh of %d nodes): probe a subset of peers per node (subset_size)",
				errMeshTooLarge, MaxMeshNodes*(MaxMeshNodes-1), MaxMeshNodes)
		}
		if err != nil {
			return nil, fmt.Errorf("latest probe samples %s %s: %w", testspec.PathName(path), testspec.ProbeKindName(kind), err)
		}
		m := make(map[[2]string]store.LatestSample, len(got))
		for _, s := range got {
			m[[2]string{s.Key.Src, s.Key.Dst}] = s
		}
		return m, nil
	}
	cells, err := read(path)
	if err != nil {
		return nil, err
	}
	baseline := measurev1.Path_PATH_HOST_TO_HOST
	var base map[[2]string]store.LatestSample
	if path != baseline && slices.Contains(p.Paths, baseline) {
		if base, err = read(baseline); err != nil {
			return nil, err
		}
	}
	v.Test, v.Params, v.Unit, v.HigherIsBetter = testspec.ProbeTestName(kind), "", "s", false
	v.Path, v.Baseline = testspec.PathName(path), testspec.PathName(baseline)
	v.Label = "continuous probes"
	v.RefreshSeconds = ri.Seconds()
	if p.Faults != nil {
		if f := p.Faults(); f != nil {
			v.Findings = f
		}
	}
	fillProbeMesh(v, cells, base)
	u.probes.mu.Lock()
	if u.probes.views == nil {
		u.probes.views = map[[2]int32]probeCached{}
	}
	u.probes.views[key] = probeCached{at: now, v: v}
	u.probes.mu.Unlock()
	return v, nil
}

// ProbeFreshness is how old a node's newest report period may be and
// still be the probe mesh's: three report intervals and the time a
// report takes to come and be stored, at least 30 s (a node that missed
// a report, an agent or ingest slowed down for a few seconds, still
// shows rather than the mesh falling back to a run). The coordinator
// leaves the reports that recent in the store's head (CompactSeries),
// where the mesh reads them.
func ProbeFreshness(reportInterval time.Duration) time.Duration {
	return max(3*reportInterval+5*time.Second, 30*time.Second)
}

// rtt is a sample's median round trip in seconds, NaN when no probe was
// answered.
func rtt(s store.LatestSample) float64 {
	if s.Sample.Received == 0 {
		return math.NaN()
	}
	return s.Sample.RTTMedian.Seconds()
}

// fillProbeMesh fills v's matrix from cells (by src, dst) against base
// (the same pairs on host-host; nil for host-host itself).
func fillProbeMesh(v *meshView, cells, base map[[2]string]store.LatestSample) {
	nodeSet := map[string]bool{}
	var values []float64
	var end time.Time
	for k, s := range cells {
		nodeSet[k[0]], nodeSet[k[1]] = true, true
		if x := rtt(s); !math.IsNaN(x) {
			values = append(values, x)
		}
		if e := s.Sample.End(); e.After(end) {
			end = e
		}
	}
	if !end.IsZero() {
		v.EndTime = end.UTC().Format("2006-01-02T15:04:05Z")
	}
	median := stats.FiniteMedian(values)
	v.Median = fig(median)
	// ref is a pair's reference: its host-host median, or the matrix's.
	ref := func(pair [2]string) (float64, bool) {
		if base == nil {
			return median, false
		}
		b, ok := base[pair]
		if !ok {
			return math.NaN(), false
		}
		return rtt(b), true
	}
	cellAt := func(src, dst string) meshCell {
		s, ok := cells[[2]string{src, dst}]
		if !ok || s.Sample.Sent == 0 {
			return meshCell{state: stateNone}
		}
		r, hasBase := ref([2]string{src, dst})
		c := probeCell(s, r)
		c.hasBase = hasBase
		return c
	}
	pairs := func(yield func(src, dst string) bool) {
		for pair := range cells {
			if !yield(pair[0], pair[1]) {
				return
			}
		}
	}
	fillGrid(v, slices.Sorted(maps.Keys(nodeSet)), pairs, cellAt)
}

// probeCell classifies a pair's sample s (Sent > 0) against its
// reference RTT r (seconds; NaN: none): its state, its RTT median
// (seconds; NaN when no probe was answered: stateFail) and its loss
// (0..1).
func probeCell(s store.LatestSample, r float64) meshCell {
	c := meshCell{state: stateOK, value: rtt(s), ref: r, hasLoss: true,
		loss: stats.LossRatio(uint64(s.Sample.Sent), uint64(s.Sample.Received))}
	switch {
	case math.IsNaN(c.value):
		c.state = stateFail
	case c.loss > 0 || s.Sample.Status != measurev1.Status_STATUS_OK || worse(c.value, r, false):
		c.state = stateDegraded
	}
	return c
}

// worstShown is how many nodes the matrix of a probe period or a run of
// more than MaxMeshNodes shows (worstNodes): as many as stay readable.
const worstShown = 300

// worstNodes are the worstShown of nodes (sorted) with the most failed or
// degraded pairs, as source or destination (bad counts them), then by
// name: a probe period or a run of more nodes than a matrix can show
// shows those, so that the faulty ones are still the cross in its corner.
func worstNodes(nodes []string, bad map[string]int) []string {
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b string) int { return bad[b] - bad[a] })
	out = out[:min(len(out), worstShown)]
	slices.Sort(out)
	return out
}
