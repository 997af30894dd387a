// Package alert owns the coordinator's standing verdict on the cluster:
// after every continuous run ends, it localises the faults in the run's
// results (coordinator/diagnose), logs a fault when it appears and when it
// clears, and hands the current findings to a Publisher (the Prometheus
// meshperf_fault and meshperf_external_fault gauges). A finding about an
// external target is logged with target= instead of node=, and a node's
// egress finding adds targets=; a finding is keyed by what it is about
// (node or target), its name and its kind, so that a finding about a
// target and one about a node never stand for, or clear, each other.
// On-demand runs are left to `coordinator diagnose`: they may target a
// subset of pairs on purpose.
package alert

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// queueSize bounds the ended runs waiting to be diagnosed; beyond it the
// oldest is skipped (a newer run says more about now).
const queueSize = 8

// readTimeout bounds reading one run and its results.
const readTimeout = 30 * time.Second

// Store is what the alerter reads of coordinator/store.
type Store interface {
	// GetRun returns a run's header and plan.
	GetRun(ctx context.Context, runID string) (*measurev1.Run, error)
	// RunResults returns every result of a run.
	RunResults(ctx context.Context, runID string) ([]*measurev1.Result, error)
}

// Publisher receives the current findings after every continuous run.
type Publisher interface {
	// SetFaults replaces the published findings; fs may be empty (no
	// fault). It must not keep fs.
	SetFaults(fs []diagnose.Finding)
}

// Config configures New.
type Config struct {
	// Store is read for the ended runs; required.
	Store Store
	// Publisher, if set, gets the findings of every continuous run.
	Publisher Publisher
	// Logger receives "fault localised" and "fault persists" (warn) and
	// "fault cleared" (info) lines, with node= or target= and kind=; nil
	// means discard.
	Logger *slog.Logger
}

// Alerter diagnoses continuous runs as they end. It is a runs.Observer:
// RunEnded queues the run without blocking, Run diagnoses.
type Alerter struct {
	cfg   Config
	log   *slog.Logger
	ended chan string

	mu      sync.Mutex
	byLabel map[string]judged // the newest judged run of each schedule
	handled int               // ended runs taken from the queue
}

// judged is the verdict on one continuous run.
type judged struct {
	runID    string
	findings []diagnose.Finding
}

// New returns an Alerter; call Run to start it.
func New(cfg Config) *Alerter {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Alerter{cfg: cfg, log: log, ended: make(chan string, queueSize), byLabel: map[string]judged{}}
}

// RunStarted is part of runs.Observer; it does nothing.
func (a *Alerter) RunStarted(string) {}

// Recorded is part of runs.Observer; it does nothing.
func (a *Alerter) Recorded([]*measurev1.Result) {}

// RunEnded queues the run for diagnosis; it never blocks. Interrupted and
// canceled runs are skipped at once: their missing tests say nothing about
// the network.
func (a *Alerter) RunEnded(runID string, state measurev1.RunState) {
	if state == measurev1.RunState_RUN_STATE_INTERRUPTED || state == measurev1.RunState_RUN_STATE_CANCELED {
		a.mu.Lock()
		a.handled++
		a.mu.Unlock()
		return
	}
	for {
		select {
		case a.ended <- runID:
			return
		default:
		}
		select { // full: skip the oldest
		case old := <-a.ended:
			a.log.Warn("alert: too many ended runs waiting; skipping the oldest", "run_id", old)
		default:
		}
	}
}

// Current returns the findings of the newest diagnosed run of every
// continuous schedule, merged (a fault that two schedules see is listed
// once), and the IDs of those runs, sorted.
func (a *Alerter) Current() (runIDs []string, fs []diagnose.Finding) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.currentLocked()
}

func (a *Alerter) currentLocked() (runIDs []string, fs []diagnose.Finding) {
	seen := map[string]bool{}
	for _, label := range slices.Sorted(maps.Keys(a.byLabel)) {
		j := a.byLabel[label]
		runIDs = append(runIDs, j.runID)
		for _, f := range j.findings {
			if k := key(f); !seen[k] {
				seen[k] = true
				fs = append(fs, f)
			}
		}
	}
	slices.Sort(runIDs)
	return runIDs, fs
}

// key names a finding by what it is about (a target or a node), its name
// and its kind.
func key(f diagnose.Finding) string {
	if f.Target != "" {
		return "target\x00" + f.Target + "\x00" + string(f.Kind)
	}
	return "node\x00" + f.Node + "\x00" + string(f.Kind)
}

// subject is the log attributes naming what f is about: node=, or target=
// for a finding about an external target.
func subject(f diagnose.Finding) []any {
	if f.Target != "" {
		return []any{"target", f.Target}
	}
	return []any{"node", f.Node}
}

// extra is the log attributes that follow the others: the failing sources
// of a finding about a target, the targets of a node's egress finding.
func extra(f diagnose.Finding) []any {
	var attrs []any
	if len(f.Sources) > 0 {
		attrs = append(attrs, "sources", strings.Join(f.Sources, ","))
	}
	if len(f.Targets) > 0 {
		attrs = append(attrs, "targets", strings.Join(f.Targets, ","))
	}
	return attrs
}

// Handled returns how many ended runs the alerter has dealt with, judged
// or skipped (on-demand, interrupted, unreadable).
func (a *Alerter) Handled() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handled
}

// Run diagnoses ended continuous runs until ctx ends; it returns nil.
func (a *Alerter) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case runID := <-a.ended:
			a.handle(ctx, runID)
			a.mu.Lock()
			a.handled++
			a.mu.Unlock()
		}
	}
}

// handle diagnoses one ended run if it is a continuous one.
func (a *Alerter) handle(ctx context.Context, runID string) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	run, err := a.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		a.log.Error("alert: read the ended run", "run_id", runID, "err", err)
		return
	}
	if testspec.OriginOf(run) != measurev1.RunOrigin_RUN_ORIGIN_MONITOR {
		return
	}
	results, err := a.cfg.Store.RunResults(ctx, runID)
	if err != nil {
		a.log.Error("alert: read the run's results", "run_id", runID, "err", err)
		return
	}
	a.update(run.GetSpec().GetLabel(), runID, diagnose.Diagnose(results))
}

// update replaces the findings of label's schedule, logging what appeared,
// stayed and cleared. Each schedule sees what its tests and paths can: a
// fault only one of them sees is not cleared by the other's runs.
func (a *Alerter) update(label, runID string, fs []diagnose.Finding) {
	a.mu.Lock()
	_, before := a.currentLocked()
	a.byLabel[label] = judged{runID: runID, findings: fs}
	_, after := a.currentLocked()
	a.mu.Unlock()
	had := map[string]bool{}
	for _, f := range before {
		had[key(f)] = true
	}
	has := map[string]bool{}
	for _, f := range after {
		has[key(f)] = true
	}
	for _, f := range fs {
		example := ""
		if len(f.Bad) > 0 {
			example = f.Bad[0]
		}
		msg := "fault localised"
		if had[key(f)] {
			msg = "fault persists"
		}
		attrs := append(subject(f), "kind", f.Kind, "run_id", runID, "schedule", label, "bad", len(f.Bad), "of", f.Of, "example", example)
		a.log.Warn(msg, append(attrs, extra(f)...)...)
	}
	for _, f := range before {
		if !has[key(f)] {
			a.log.Info("fault cleared", append(subject(f), "kind", f.Kind, "run_id", runID, "schedule", label)...)
		}
	}
	if a.cfg.Publisher != nil {
		a.cfg.Publisher.SetFaults(after)
	}
}
