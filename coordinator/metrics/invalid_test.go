package metrics_test

import (
	"math"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// meshperf_results_invalid_total counts the figures that failed by source
// and reason, every series from 0; a non-finite headline that reached
// Recorded sets no figure.
func TestInvalidFigures(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	var c sanity.Counter
	m, err := metrics.New(metrics.Config{Invalid: &c})
	if err != nil {
		t.Fatal(err)
	}
	c.Add(sanity.SourceRun, &sanity.Error{Reason: sanity.Negative})
	c.Add(sanity.SourceRun, &sanity.Error{Reason: sanity.Negative})
	c.Add(sanity.SourceProbe, &sanity.Error{Reason: sanity.NotFinite})
	m.Recorded(feedNonFinite())
	fams := scrape(t, ctx, serve(t, m))
	const name = "meshperf_results_invalid_total"
	tests := []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"source": "run", "reason": "negative"}, 2},
		{map[string]string{"source": "probe", "reason": "not_finite"}, 1},
		{map[string]string{"source": "run", "reason": "out_of_bounds"}, 0},
		{map[string]string{"source": "probe", "reason": "inconsistent"}, 0},
	}
	for _, tt := range tests {
		if got, ok := value(fams, name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %t), want %v", name, tt.labels, got, ok, tt.want)
		}
	}
	if got := len(fams[name].GetMetric()); got != len(sanity.Sources)*len(sanity.Reasons) {
		t.Errorf("%d series of %s, want one per source and reason", got, name)
	}
	for _, l := range []map[string]string{node("r", "src", "ping", "host-host"), node("r", "src", "iperf3_tcp", "pod-pod")} {
		if v, ok := value(fams, "meshperf_node_latency_seconds", l); ok {
			t.Errorf("latency %v = %v: a non-finite figure is exported", l, v)
		}
		if v, ok := value(fams, "meshperf_node_throughput_bps", l); ok {
			t.Errorf("throughput %v = %v: a non-finite figure is exported", l, v)
		}
	}
}

func feedNonFinite() []*measurev1.Result {
	return []*measurev1.Result{result("r", "a", hh, ping, math.NaN()), result("r", "a", pp, iperf, math.Inf(1))}
}
