package metrics_test

import (
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Results to an external target count for their source node only: the
// target's name never becomes a node label.
func TestExternalResults(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	m, err := metrics.New(metrics.Config{PerPair: true})
	if err != nil {
		t.Fatal(err)
	}
	he := measurev1.Path_PATH_HOST_TO_EXTERNAL
	feedAll(m, [][]*measurev1.Result{
		{result("n1", "ingress", he, ping, 0.010)},
		{result("n1", "peer", he, ping, 0.030)},
		{failure("n2", "ingress", he, ping, measurev1.Status_STATUS_UNREACHABLE)},
	})
	fams := scrape(t, ctx, serve(t, m))
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
		absent bool
	}{
		{"source median over targets", "meshperf_node_latency_seconds", node("n1", "src", "ping", "host-external"), 0.020, false},
		{"source counts", "meshperf_node_results_total", nodeStatus("n2", "src", "ping", "host-external", "unreachable"), 1, false},
		{"no target as a dst node (figure)", "meshperf_node_latency_seconds", node("ingress", "dst", "ping", "host-external"), 0, true},
		{"no target as a dst node (count)", "meshperf_node_results_total", nodeStatus("ingress", "dst", "ping", "host-external", "ok"), 0, true},
		{"no target failure as a dst node", "meshperf_node_results_total", nodeStatus("ingress", "dst", "ping", "host-external", "unreachable"), 0, true},
		{"per pair names the target", "meshperf_pair_latency_seconds",
			map[string]string{"src": "n1", "dst": "peer", "test": "ping", "path": "host-external"}, 0.030, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, there := value(fams, tt.metric, tt.labels)
			switch {
			case tt.absent && there:
				t.Errorf("%s%v = %v, want no such series", tt.metric, tt.labels, got)
			case !tt.absent && !there:
				t.Errorf("%s%v is missing, want %v", tt.metric, tt.labels, tt.want)
			case !tt.absent && !testutil.Near(got, tt.want, 1e-9):
				t.Errorf("%s%v = %v, want %v", tt.metric, tt.labels, got, tt.want)
			}
		})
	}
}
