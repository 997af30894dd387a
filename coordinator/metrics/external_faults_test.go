package metrics_test

import (
	"maps"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/testnet"
)

// labelled returns "NAME KIND" for every series of family, NAME the value
// of label name; it fails the test on a value other than 1.
func labelled(t *testing.T, fam *dto.MetricFamily, name string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, s := range fam.GetMetric() {
		var n, kind string
		for _, lp := range s.GetLabel() {
			switch lp.GetName() {
			case name:
				n = lp.GetValue()
			case "kind":
				kind = lp.GetValue()
			}
		}
		if s.GetGauge().GetValue() != 1 {
			t.Errorf("%s{%s=%q,kind=%q} = %v, want 1", fam.GetName(), name, n, kind, s.GetGauge().GetValue())
		}
		got[n+" "+kind] = true
	}
	return got
}

// Findings about external targets are meshperf_external_fault{target,kind}
// series, never meshperf_fault ones; a node's egress finding is a
// meshperf_fault series. Each is added and removed as its finding comes
// and goes.
func TestExternalFaults(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, m)
	pod2 := diagnose.Finding{Node: "node-2", Kind: diagnose.KindPodNetwork}
	egress3 := diagnose.Finding{Node: "node-3", Kind: diagnose.KindEgress, Targets: []string{"ingress"}}
	ingressDown := diagnose.Finding{Target: "ingress", Kind: diagnose.KindExternalDown, Sources: []string{"node-1", "node-2"}}
	ingressHTTP := diagnose.Finding{Target: "ingress", Kind: diagnose.KindExternalHTTPDown, Sources: []string{"node-1", "node-2"}}
	otherPartial := diagnose.Finding{Target: "other-cluster", Kind: diagnose.KindExternalPartial, Sources: []string{"node-2"}}
	steps := []struct {
		name              string
		set               []diagnose.Finding
		wantNode, wantExt map[string]bool
	}{
		{"none", nil, map[string]bool{}, map[string]bool{}},
		{"a target down", []diagnose.Finding{ingressDown}, map[string]bool{}, map[string]bool{"ingress external-down": true}},
		{"and a node fault, a node's egress, another target", []diagnose.Finding{pod2, ingressDown, egress3, otherPartial},
			map[string]bool{"node-2 pod-network": true, "node-3 egress-broken": true},
			map[string]bool{"ingress external-down": true, "other-cluster external-partial": true}},
		{"the target's kind changes, the other clears", []diagnose.Finding{pod2, egress3, ingressHTTP},
			map[string]bool{"node-2 pod-network": true, "node-3 egress-broken": true},
			map[string]bool{"ingress external-http-down": true}},
		{"targets clear, nodes stay", []diagnose.Finding{pod2, egress3},
			map[string]bool{"node-2 pod-network": true, "node-3 egress-broken": true}, map[string]bool{}},
		{"nodes clear, a target comes back", []diagnose.Finding{ingressDown}, map[string]bool{}, map[string]bool{"ingress external-down": true}},
		{"all clear", nil, map[string]bool{}, map[string]bool{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			m.SetFaults(st.set)
			fams := scrape(t, ctx, base)
			if got := labelled(t, fams["meshperf_fault"], "node"); !maps.Equal(got, st.wantNode) {
				t.Errorf("meshperf_fault series %v, want %v", got, st.wantNode)
			}
			if got := labelled(t, fams["meshperf_external_fault"], "target"); !maps.Equal(got, st.wantExt) {
				t.Errorf("meshperf_external_fault series %v, want %v", got, st.wantExt)
			}
		})
	}
}

// A fault that persists from one SetFaults to the next is never missing
// from a scrape in between (which would restart an alert's "for" timer),
// on either gauge, while the faults beside it come and go.
func TestPersistingFaultsNeverVanish(t *testing.T) {
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	node := diagnose.Finding{Node: "node-2", Kind: diagnose.KindEgress}
	target := diagnose.Finding{Target: "ingress", Kind: diagnose.KindExternalDown}
	sets := [][]diagnose.Finding{
		{node, target, {Node: "node-1", Kind: diagnose.KindMTU}},
		{node, target, {Target: "other-cluster", Kind: diagnose.KindExternalPartial}},
	}
	m.SetFaults(sets[0])
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m.SetFaults(sets[i%2])
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	scrapes := 0
	for time.Now().Before(deadline) {
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		scrapes++
		var sawNode, sawTarget bool
		for _, f := range fams {
			for _, s := range f.GetMetric() {
				for _, lp := range s.GetLabel() {
					sawNode = sawNode || f.GetName() == "meshperf_fault" && lp.GetName() == "node" && lp.GetValue() == "node-2"
					sawTarget = sawTarget || f.GetName() == "meshperf_external_fault" && lp.GetName() == "target" && lp.GetValue() == "ingress"
				}
			}
		}
		if !sawNode || !sawTarget {
			t.Fatalf("scrape %d: a persisting fault is missing (node-2 %v, ingress %v)", scrapes, sawNode, sawTarget)
		}
	}
	close(stop)
	<-done
}
