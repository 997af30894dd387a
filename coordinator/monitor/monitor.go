// Package monitor owns meshperf's continuous work: it ticks the schedules
// of the coordinator's config file (a frequent light mesh, a rare bandwidth
// mesh; parsed and checked by coordinator/config, which owns the file),
// each at its interval moved by a random jitter so agents do not
// fire in step. On-demand runs go first: a tick that finds any run in
// progress is skipped (and logged), so continuous work never delays an
// operator's run. Runs cover the default mesh, which leaves nodes in
// maintenance out.
package monitor

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/config"
	"github.com/meshperf/meshperf/internal/tick"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Runs is what the monitor needs of the run manager and the store.
type Runs interface {
	// Trigger starts a run of origin (the monitor's:
	// RUN_ORIGIN_MONITOR).
	Trigger(ctx context.Context, spec *measurev1.RunSpec, origin measurev1.RunOrigin) (*measurev1.Run, error)
	// Runs lists run headers (no planned tests) by state, all runs
	// without states, oldest first.
	Runs(ctx context.Context, states ...measurev1.RunState) ([]*measurev1.Run, error)
	// NewestRun returns the header of the newest run labelled label, or
	// nil if there is none (or none among the newest runs it reads).
	NewestRun(ctx context.Context, label string) (*measurev1.Run, error)
}

// Config configures Run.
type Config struct {
	// Plans are the schedules (config.Load's Settings.Plans).
	Plans []config.Plan
	// Runs starts runs and tells whether any is in progress; required.
	Runs Runs
	// Logger receives a line per tick; nil discards.
	Logger *slog.Logger
}

// Run ticks every plan until ctx ends, then returns nil.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, p := range cfg.Plans {
		g.Go(func() error {
			plog := log.With("schedule", p.Name)
			tick.Repeat(ctx, func() time.Duration { return Next(p) }, func() { Tick(ctx, p, cfg.Runs, plog) })
			return nil
		})
	}
	return g.Wait()
}

// Next is the delay before a plan's next tick: its interval moved by a
// uniform random amount in [-jitter, +jitter].
func Next(p config.Plan) time.Duration {
	if p.Jitter <= 0 {
		return p.Interval
	}
	return p.Interval - p.Jitter + rand.N(2*p.Jitter+1)
}

// Tick triggers one run of p, unless a run is in progress (an on-demand
// run, or the previous continuous one), and reports whether it started one.
// A plan of mesh rounds (RunSpec.mesh_rounds) starts where its newest run
// (the newest of its label) ended, or, if that run was interrupted or
// canceled, at that run's rounds again: its runs measure the mesh's rounds
// in turn, and so every pair, across coordinator restarts too.
func Tick(ctx context.Context, p config.Plan, runs Runs, log *slog.Logger) bool {
	active, err := runs.Runs(ctx, measurev1.RunState_RUN_STATE_QUEUED, measurev1.RunState_RUN_STATE_RUNNING)
	if err != nil {
		log.Error("continuous run: list runs", "err", err)
		return false
	}
	if len(active) > 0 {
		log.Info("continuous run skipped: a run is in progress", "run_id", active[0].GetRunId(), "label", active[0].GetSpec().GetLabel())
		return false
	}
	spec := p.Spec
	if spec.GetMeshRounds() > 0 {
		last, err := runs.NewestRun(ctx, spec.GetLabel())
		if err != nil {
			log.Error("continuous run: find the plan's newest run", "err", err)
			return false
		}
		if n := last.GetMeshRoundCount(); n > 0 {
			spec = proto.CloneOf(spec)
			spec.FirstMeshRound = last.GetSpec().GetFirstMeshRound() % n
			switch last.GetState() {
			case measurev1.RunState_RUN_STATE_SUCCEEDED, measurev1.RunState_RUN_STATE_FAILED:
				// Measured: on to the next rounds.
				spec.FirstMeshRound = (spec.FirstMeshRound + last.GetMeshRounds()) % n
			default:
				// Interrupted (a restart) or canceled: its rounds again,
				// or they would wait a whole turn of the mesh.
			}
		}
	}
	run, err := runs.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_MONITOR)
	if err != nil {
		log.Warn("continuous run not started", "err", err)
		return false
	}
	log.Info("continuous run started", "run_id", run.GetRunId(), "tests", run.GetTestsPlanned(),
		"mesh_rounds", run.GetMeshRounds(), "first_mesh_round", spec.GetFirstMeshRound(), "of", run.GetMeshRoundCount())
	return true
}
