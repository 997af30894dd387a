package remotewrite

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshperf/meshperf/coordinator/diagnose"
)

func TestSetFaults(t *testing.T) {
	rcv := newReceiver(t)
	w, err := New(fastConfig(rcv.url))
	if err != nil {
		t.Fatal(err)
	}
	stop := runWriter(t, w)
	node := diagnose.Finding{Node: "node-a", Kind: "node-unreachable"}
	ext := diagnose.Finding{Target: "dns", Kind: "external-down"}
	for _, fs := range [][]diagnose.Finding{
		{node, ext, node}, // node twice: one sample
		{node},            // ext cleared: 0
		nil,               // node cleared: 0
		nil,               // nothing to say
	} {
		w.SetFaults(fs)
	}
	stop()
	rcv.check(t)
	got := map[string][]float64{}
	for k, ss := range rcv.samples() {
		for _, s := range ss {
			got[k] = append(got[k], s.v)
		}
	}
	want := map[string][]float64{
		"__name__=meshperf_fault,kind=node-unreachable,node=node-a":      {1, 1, 0},
		"__name__=meshperf_external_fault,kind=external-down,target=dns": {1, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fault samples (-want +got):\n%s", diff)
	}
}
