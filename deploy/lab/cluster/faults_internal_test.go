package cluster

import (
	"testing"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/deploy/lab"
)

// TestFaultScenarioKinds pins what each fault scenario must be found as
// and on which node, without a lab: the scenarios are built, not run.
func TestFaultScenarioKinds(t *testing.T) {
	d := &faultsDemo{l: &lab.Lab{Nodes: make([]lab.Node, 4)}}
	want := []struct {
		name, node string
		kind       diagnose.Kind
	}{
		{"clean", "", ""},
		{"pod-drop", "node-2", diagnose.KindPodNetwork},
		{"mtu-blackhole", "node-3", diagnose.KindMTU},
		{"rate-limit", "node-4", diagnose.KindSlow},
		{"icmp-drop", "node-2", diagnose.KindICMP},
		{"agent-killed", "node-3", diagnose.KindAgentGone},
		{"coordinator-killed", "coordinator", ""},
	}
	got := d.scenarios()
	if len(got) != len(want) {
		t.Fatalf("%d scenarios, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.name != w.name || g.node != w.node || g.kind != w.kind {
			t.Errorf("scenario %d = %s on %q as %q, want %s on %q as %q", i, g.name, g.node, g.kind, w.name, w.node, w.kind)
		}
		if w.name != "coordinator-killed" && (g.inject == nil || g.clear == nil) {
			t.Errorf("scenario %s: inject or clear is nil", w.name)
		}
	}
}
