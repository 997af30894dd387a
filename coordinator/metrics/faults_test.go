package metrics_test

import (
	"maps"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/testnet"
)

func TestFaults(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, m)
	steps := []struct {
		name string
		set  []diagnose.Finding
		want map[string]bool // "node kind" series present
	}{
		{"none", nil, map[string]bool{}},
		{"one", []diagnose.Finding{{Node: "node-2", Kind: diagnose.KindMTU}}, map[string]bool{"node-2 mtu-blackhole": true}},
		{"replaced", []diagnose.Finding{{Node: "node-3", Kind: diagnose.KindICMP}, {Node: "node-1", Kind: diagnose.KindAgentGone}},
			map[string]bool{"node-3 icmp-blocked": true, "node-1 agent-gone": true}},
		{"cleared", nil, map[string]bool{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			m.SetFaults(st.set)
			fams := scrape(t, ctx, base)
			got := map[string]bool{}
			for _, s := range fams["meshperf_fault"].GetMetric() {
				var node, kind string
				for _, lp := range s.GetLabel() {
					switch lp.GetName() {
					case "node":
						node = lp.GetValue()
					case "kind":
						kind = lp.GetValue()
					}
				}
				if s.GetGauge().GetValue() != 1 {
					t.Errorf("meshperf_fault{node=%q,kind=%q} = %v, want 1", node, kind, s.GetGauge().GetValue())
				}
				got[node+" "+kind] = true
			}
			if !maps.Equal(got, st.want) {
				t.Errorf("meshperf_fault series %v, want %v", got, st.want)
			}
		})
	}
}
