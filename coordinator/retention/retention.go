// Package retention keeps the coordinator's store bounded: raw results
// older than the retention are folded into one rollup per node pair, path,
// test, parameters and hour (samples, failures by status, min, median, max
// and mean of the headline figure), then deleted; runs that ended before
// the retention are deleted. The continuous probes' series chunks whose
// block ended before the retention are rolled up per series and hour
// (coordinator/store RollUpSeries: periods, sent, received, min, max,
// median and p90 estimates, failed periods and the last failure's
// status) and deleted in the same transactions, and the hourly points
// are kept for the series rollup retention (30 days by default), then
// deleted whole days at a time; with no series rollup retention the
// chunks are deleted without rollups. bbolt reuses the freed pages, so
// the file stops growing once the windows are full.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/stats/infer"
	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Store is what retention needs of coordinator/store.
type Store interface {
	// RollUp folds and deletes results that started before cutoff.
	RollUp(ctx context.Context, cutoff time.Time, maxResults int, fold func([]*measurev1.Result) []*measurev1.Rollup) (int, error)
	// DeleteRunsBefore deletes runs that ended before cutoff.
	DeleteRunsBefore(ctx context.Context, cutoff time.Time) (int, error)
	// DeleteSeriesBefore deletes the probe series' chunks and head reports
	// that ended at or before cutoff and returns the samples deleted.
	DeleteSeriesBefore(ctx context.Context, cutoff time.Time) (int, error)
	// RollUpSeries rolls up and deletes the probe series' chunks that
	// ended at or before cutoff, in batches (at most maxBatches; 0: all).
	RollUpSeries(ctx context.Context, cutoff time.Time, maxBatches int) (store.SeriesRollupCounts, error)
	// DeleteSeriesRollupsBefore deletes the series' rollup chunks whose
	// day ended at or before cutoff and returns the points deleted.
	DeleteSeriesRollupsBefore(ctx context.Context, cutoff time.Time) (int, error)
}

// Counts is what one Pass did.
type Counts struct {
	// Rolled counts the results rolled up (and deleted).
	Rolled int
	// Runs counts the runs deleted.
	Runs int
	// SeriesSamples counts the probe series' samples deleted (rolled up
	// first when series rollups are kept).
	SeriesSamples int
	// SeriesRollupPoints counts the hourly series points written (new,
	// or merged with a late chunk's).
	SeriesRollupPoints int
	// SeriesRollupsDeleted counts the hourly series points deleted past
	// the series rollup retention.
	SeriesRollupsDeleted int
	// SeriesQuarantined counts the series chunks that did not decode and
	// were moved to the store's quarantine bucket instead of rolled up.
	SeriesQuarantined int
	// Quarantined is why, one line per chunk, each naming its bucket and
	// key (Run logs it as a warning); empty if none.
	Quarantined string
}

// Config configures Run.
type Config struct {
	// Store is the store to keep bounded; required.
	Store Store
	// Retention is how long raw results, runs and raw probe series are
	// kept; required (> 0).
	Retention time.Duration
	// SeriesRollupRetention is how long the probe series' hourly rollups
	// are kept (from now, like Retention: the rollups cover the time
	// between the two); zero means no series rollups (chunks past
	// Retention are deleted as they are). It must not be shorter than
	// Retention.
	SeriesRollupRetention time.Duration
	// Interval is how often a pass runs; zero means 1 h.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a line per pass that did something; nil discards.
	Logger *slog.Logger
}

// Run passes at once and then every Interval until ctx ends; it returns
// nil then. A failed pass is logged and retried at the next interval. A
// SeriesRollupRetention shorter than Retention is an error at once.
func Run(ctx context.Context, cfg Config) error {
	if cfg.SeriesRollupRetention < 0 || cfg.SeriesRollupRetention > 0 && cfg.SeriesRollupRetention < cfg.Retention {
		return fmt.Errorf("series rollup retention %v: want 0 (no rollups) or at least the retention %v", cfg.SeriesRollupRetention, cfg.Retention)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		now := cfg.Now()
		var rollupCutoff time.Time
		if cfg.SeriesRollupRetention > 0 {
			rollupCutoff = now.Add(-cfg.SeriesRollupRetention)
		}
		c, err := Pass(ctx, cfg.Store, now.Add(-cfg.Retention), rollupCutoff)
		if c.Quarantined != "" {
			log.Warn("retention pass: probe series chunks that do not decode moved to the store's quarantine bucket",
				"chunks", c.SeriesQuarantined, "why", c.Quarantined)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("retention pass", "err", err)
		case err != nil:
		case c != Counts{}:
			log.Info("retention pass", "results_rolled_up", c.Rolled, "runs_deleted", c.Runs, "series_samples_deleted", c.SeriesSamples,
				"series_rollup_points", c.SeriesRollupPoints, "series_rollups_deleted", c.SeriesRollupsDeleted, "series_quarantined", c.SeriesQuarantined,
				"retention", cfg.Retention, "series_rollup_retention", cfg.SeriesRollupRetention)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass rolls up every result older than cutoff, deletes the runs that
// ended before it, and rolls up and deletes the probe series' chunks
// that ended at or before it; then deletes the series rollups whose day
// ended at or before rollupCutoff. A zero rollupCutoff means no series
// rollups: the chunks are deleted as they are. It returns how many of
// each, as far as it got when it fails; a pass killed part way leaves
// every series hour either raw or rolled up, and the next pass goes on.
func Pass(ctx context.Context, st Store, cutoff, rollupCutoff time.Time) (Counts, error) {
	var c Counts
	for {
		n, err := st.RollUp(ctx, cutoff, 0, Fold)
		c.Rolled += n
		if err != nil {
			return c, err
		}
		if n == 0 {
			break
		}
	}
	var err error
	if c.Runs, err = st.DeleteRunsBefore(ctx, cutoff); err != nil {
		return c, err
	}
	if rollupCutoff.IsZero() {
		c.SeriesSamples, err = st.DeleteSeriesBefore(ctx, cutoff)
		return c, err
	}
	// RollUpSeries compacts the head reports that ended by cutoff into
	// chunks first, so that nothing is left for DeleteSeriesBefore.
	rc, err := st.RollUpSeries(ctx, cutoff, 0)
	c.SeriesSamples, c.SeriesRollupPoints, c.SeriesQuarantined = rc.Samples, rc.Points, len(rc.Quarantined)
	if len(rc.Quarantined) > 0 {
		c.Quarantined = errors.Join(rc.Quarantined...).Error()
	}
	if err != nil {
		return c, err
	}
	c.SeriesRollupsDeleted, err = st.DeleteSeriesRollupsBefore(ctx, rollupCutoff)
	return c, err
}

// Fold summarizes results into one rollup per node pair, path, test,
// parameters, IP family and UTC hour of their start time. An IPv6
// rollup carries IP_FAMILY_IPV6; an IPv4 one (results stored before
// families included) leaves ip_family unset, as rollups were before.
func Fold(results []*measurev1.Result) []*measurev1.Rollup {
	type key struct {
		cell testcell.CellKey
		hour time.Time
	}
	groups := map[key][]*measurev1.Result{}
	var order []key
	for _, r := range results {
		k := key{testcell.KeyOf(r), r.GetStartTime().AsTime().UTC().Truncate(time.Hour)}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]*measurev1.Rollup, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		ru := &measurev1.Rollup{SrcNode: k.cell.Src, DstNode: k.cell.Dst, Path: k.cell.Path, Spec: rs[0].GetSpec(), HourStart: timestamppb.New(k.hour)}
		if k.cell.Family == measurev1.IPFamily_IP_FAMILY_IPV6 {
			ru.IpFamily = measurev1.IPFamily_IP_FAMILY_IPV6
		}
		failed := map[measurev1.Status]uint32{}
		var values []float64
		for _, r := range rs {
			if v, ok := testcell.Measured(r); ok {
				values = append(values, v)
			} else {
				failed[testcell.StatusOf(r)]++
			}
		}
		if s, err := infer.Summarize(values); err == nil {
			ru.Samples, ru.MinValue, ru.MedianValue, ru.MaxValue, ru.MeanValue = uint32(s.N), s.Min, s.Median, s.Max, s.Mean
		}
		statuses := make([]measurev1.Status, 0, len(failed))
		for st := range failed {
			statuses = append(statuses, st)
		}
		slices.Sort(statuses)
		for _, st := range statuses {
			ru.Failed = append(ru.Failed, &measurev1.StatusCount{Status: st, Count: failed[st]})
		}
		out = append(out, ru)
	}
	return out
}
