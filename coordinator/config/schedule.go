package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// minInterval is the shortest interval of a schedule.
const minInterval = 5 * time.Second

// Bounds of a schedule's mesh_rounds: fault localisation (diagnose) names
// a node whose pairs are nearly all bad while its peers' other pairs are
// fine, which needs every node in a few pairs; 10,000 rounds are the full
// mesh of 5,000 nodes.
const (
	minMeshRounds = 4
	maxMeshRounds = 10_000
)

// plan checks the schedule called name against the external list ext and
// builds its Plan; errors name the key (under "monitor.NAME.") and value.
func (s *Schedule) plan(name string, ext []*measurev1.ExternalTarget) (Plan, error) {
	p := Plan{Name: name}
	var err error
	if p.Interval, err = time.ParseDuration(s.Interval); err != nil || p.Interval < minInterval {
		return Plan{}, fmt.Errorf("interval %q: want a duration of at least %v", s.Interval, minInterval)
	}
	p.Jitter = p.Interval / 6
	if s.Jitter != "" {
		if p.Jitter, err = time.ParseDuration(s.Jitter); err != nil || p.Jitter < 0 || p.Jitter >= p.Interval/2 {
			return Plan{}, fmt.Errorf("jitter %q: want a duration from 0 to less than half the interval", s.Jitter)
		}
	}
	if len(s.Tests) == 0 {
		return Plan{}, errors.New("tests: empty; name at least one test")
	}
	if s.MeshRounds != 0 && (s.MeshRounds < minMeshRounds || s.MeshRounds > maxMeshRounds) {
		return Plan{}, fmt.Errorf("mesh_rounds %d: want 0 (the full mesh) or %d to %d", s.MeshRounds, minMeshRounds, maxMeshRounds)
	}
	in := RunInput{Label: testspec.ContinuousLabelPrefix + name, Repeats: s.Repeats, Tests: s.Tests, Paths: s.Paths, Sweep: s.Sweep, MeshRounds: s.MeshRounds}
	if s.Duration != "" {
		if in.Duration, err = time.ParseDuration(s.Duration); err != nil {
			return Plan{}, fmt.Errorf("duration %q: %w", s.Duration, err)
		}
	}
	if p.Spec, err = BuildRunSpec(in, scheduleNames); err != nil {
		return Plan{}, err
	}
	if err := s.externalTargets(p.Spec, ext); err != nil {
		return Plan{}, err
	}
	// What Plan would refuse at every tick is refused now: a probe mesh of
	// two nodes whose names no target can have.
	probe := []string{" a", " b"}
	if _, err := schedule.Plan(p.Spec, schedule.Nodes{Mesh: probe, Targetable: probe, External: ext}); err != nil {
		return Plan{}, fmt.Errorf("tests and paths: %w", err)
	}
	return p, nil
}

// externalTargets checks the schedule's external_targets against the
// external list and the paths, and puts them in spec.
func (s *Schedule) externalTargets(spec *measurev1.RunSpec, ext []*measurev1.ExternalTarget) error {
	for i, name := range s.ExternalTargets {
		switch {
		case !slices.ContainsFunc(ext, func(t *measurev1.ExternalTarget) bool { return t.GetName() == name }):
			return fmt.Errorf("external_targets[%d] %q: not in the external list", i, name)
		case slices.Index(s.ExternalTargets, name) < i:
			return fmt.Errorf("external_targets[%d] %q: listed twice", i, name)
		}
	}
	spec.ExternalTargets = slices.Clone(s.ExternalTargets)
	_, extPaths := testspec.SplitPaths(spec.GetPaths())
	hasExt := len(extPaths) > 0
	switch {
	case len(s.ExternalTargets) > 0 && len(spec.GetPaths()) > 0 && !hasExt:
		return fmt.Errorf("external_targets %v: paths has no host-external or pod-external", s.ExternalTargets)
	case len(s.ExternalTargets) == 0 && hasExt:
		return errors.New("paths: host-external and pod-external need external_targets")
	}
	return nil
}
