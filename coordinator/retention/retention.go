// Package retention keeps the coordinator's store bounded: raw results
// older than the retention are folded into one rollup per node pair, path,
// test, parameters and hour (samples, failures by status, min, median, max
// and mean of the headline figure), then deleted; runs that ended before
// the retention are deleted, and so are the continuous probes' series
// chunks whose block ended before it (whole chunks: the series keep full
// resolution for the retention, and longer history is for an external
// time-series store). bbolt reuses the freed pages, so the file stops
// growing once the retention window is full.
package retention

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/coordinator/stats"
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
}

// Counts is what one Pass did.
type Counts struct {
	// Rolled counts the results rolled up (and deleted).
	Rolled int
	// Runs counts the runs deleted.
	Runs int
	// SeriesSamples counts the probe series' samples deleted.
	SeriesSamples int
}

// Config configures Run.
type Config struct {
	// Store is the store to keep bounded; required.
	Store Store
	// Retention is how long raw results and runs are kept; required (> 0).
	Retention time.Duration
	// Interval is how often a pass runs; zero means 1 h.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a line per pass that did something; nil discards.
	Logger *slog.Logger
}

// Run passes at once and then every Interval until ctx ends; it returns
// nil then. A failed pass is logged and retried at the next interval.
func Run(ctx context.Context, cfg Config) error {
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
		c, err := Pass(ctx, cfg.Store, cfg.Now().Add(-cfg.Retention))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("retention pass", "err", err)
		case c != Counts{}:
			log.Info("retention pass", "results_rolled_up", c.Rolled, "runs_deleted", c.Runs, "series_samples_deleted", c.SeriesSamples,
				"retention", cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass rolls up every result older than cutoff, deletes the runs that
// ended before it and the probe series' chunks that ended at or before it;
// it returns how many of each, as far as it got when it fails.
func Pass(ctx context.Context, st Store, cutoff time.Time) (Counts, error) {
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
	c.SeriesSamples, err = st.DeleteSeriesBefore(ctx, cutoff)
	return c, err
}

// Fold summarizes results into one rollup per node pair, path, test,
// parameters and UTC hour of their start time.
func Fold(results []*measurev1.Result) []*measurev1.Rollup {
	type key struct {
		cell report.CellKey
		hour time.Time
	}
	groups := map[key][]*measurev1.Result{}
	var order []key
	for _, r := range results {
		k := key{report.KeyOf(r), r.GetStartTime().AsTime().UTC().Truncate(time.Hour)}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]*measurev1.Rollup, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		ru := &measurev1.Rollup{SrcNode: k.cell.Src, DstNode: k.cell.Dst, Path: k.cell.Path, Spec: rs[0].GetSpec(), HourStart: timestamppb.New(k.hour)}
		failed := map[measurev1.Status]uint32{}
		var values []float64
		for _, r := range rs {
			if r.GetStatus() == measurev1.Status_STATUS_OK && r.GetMetrics() != nil {
				values = append(values, report.Headline(r))
			} else {
				failed[r.GetStatus()]++
			}
		}
		if s, err := stats.Summarize(values); err == nil {
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
