package cluster

import (
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
)

// TestProbeDeadline: a fault at t must be named in the period that holds
// t plus one probe interval.
func TestProbeDeadline(t *testing.T) {
	d := &faultsDemo{cfg: FaultsConfig{Interval: 30 * time.Second}} // probe interval 5s
	base := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	for _, tc := range []struct{ at, want time.Duration }{
		{0, 10 * time.Second},                       // at a period's start: the next period is the first whole one after it
		{time.Second, 10 * time.Second},             // mid-period: the next period
		{4900 * time.Millisecond, 10 * time.Second}, // late in the period: still the next one
		{5 * time.Second, 15 * time.Second},
	} {
		if got := d.probeDeadline(base.Add(tc.at)); !got.Equal(base.Add(tc.want)) {
			t.Errorf("fault at +%v: deadline +%v, want +%v", tc.at, got.Sub(base), tc.want)
		}
	}
}

// TestJudgeScenario reads the probe judge's lines of a scenario: the hit
// in time, a late hit, a wrong kind, another node, a fault left held.
func TestJudgeScenario(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 1, 0, time.UTC)
	deadline := t0.Add(9 * time.Second) // 03:04:10
	s := faultScenario{name: "pod-drop", node: "node-2", kind: diagnose.KindPodNetwork}
	localised := func(node string, kind diagnose.Kind, end time.Duration) judgeEvent {
		return judgeEvent{msg: "probe fault localised", node: node, kind: kind, end: t0.Add(end), at: t0.Add(end + 2*time.Second)}
	}
	cleared := func(node string, end time.Duration) judgeEvent {
		return judgeEvent{msg: "probe fault cleared", node: node, end: t0.Add(end)}
	}
	for _, tc := range []struct {
		name          string
		evs           []judgeEvent
		quiet         bool
		wantHit       bool
		wantLocalised bool
		wantAlarms    int
	}{
		{"in time", []judgeEvent{localised("node-2", diagnose.KindPodNetwork, 9*time.Second), cleared("node-2", 30*time.Second)}, true, true, true, 0},
		{"late", []judgeEvent{localised("node-2", diagnose.KindPodNetwork, 14*time.Second), cleared("node-2", 30*time.Second)}, true, false, false, 0},
		{"wrong kind first, then right", []judgeEvent{localised("node-2", diagnose.KindICMP, 4*time.Second),
			localised("node-2", diagnose.KindPodNetwork, 9*time.Second), cleared("node-2", 30*time.Second)}, true, true, true, 1},
		{"wrong kind only", []judgeEvent{localised("node-2", diagnose.KindICMP, 9*time.Second), cleared("node-2", 30*time.Second)}, true, true, false, 1},
		{"another node", []judgeEvent{localised("node-2", diagnose.KindPodNetwork, 9*time.Second), localised("node-1", diagnose.KindICMP, 9*time.Second),
			cleared("node-2", 30*time.Second), cleared("node-1", 30*time.Second)}, true, true, true, 1},
		{"never cleared", []judgeEvent{localised("node-2", diagnose.KindPodNetwork, 9*time.Second)}, false, true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeScenario(tc.evs, s, t0, deadline, tc.quiet)
			if got := v.hit.msg != ""; got != tc.wantHit {
				t.Errorf("hit %+v, want one: %v", v.hit, tc.wantHit)
			}
			if v.localised != tc.wantLocalised || len(v.alarms) != tc.wantAlarms {
				t.Errorf("localised %v, alarms %q; want %v and %d alarms", v.localised, v.alarms, tc.wantLocalised, tc.wantAlarms)
			}
		})
	}
}

// TestLogField reads a slog text line's unquoted values.
func TestLogField(t *testing.T) {
	line := `time=2026-01-02T03:04:05.1Z level=WARN msg="probe fault localised" node=node-2 kind=pod-network period_end=2026-01-02T03:04:05Z of=32`
	for key, want := range map[string]string{"time": "2026-01-02T03:04:05.1Z", "node": "node-2", "kind": "pod-network",
		"period_end": "2026-01-02T03:04:05Z", "of": "32", "absent": ""} {
		if got := logField(line, key); got != want {
			t.Errorf("logField(%q) = %q, want %q", key, got, want)
		}
	}
}
