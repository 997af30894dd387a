package metrics_test

import (
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// lossy is an OK result of test with loss as its loss ratio.
func lossy(src, dst string, path measurev1.Path, test measurev1.Test, loss float64) *measurev1.Result {
	r := result(src, dst, path, test, 0.001)
	switch test {
	case ping:
		r.GetPing().LossRatio = loss
	case measurev1.Test_TEST_IPERF3_UDP, iperf:
		r.Metrics = &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 1e9, LossRatio: loss}}
	}
	return r
}

func nodeSeries(node, role, test, path string) map[string]string {
	return map[string]string{"node": node, "role": role, "test": test, "path": path}
}

func TestLossRatio(t *testing.T) {
	udp := measurev1.Test_TEST_IPERF3_UDP
	// n2 loses a fifth of the pings to and from it; n1 <-> n3 is clean.
	batches := [][]*measurev1.Result{
		{lossy("n1", "n2", hh, ping, 0.2)},
		{lossy("n1", "n3", hh, ping, 0)},
		{lossy("n2", "n1", hh, ping, 0.2)},
		{lossy("n2", "n3", hh, ping, 0.2)},
		{lossy("n3", "n1", hh, ping, 0)},
		{lossy("n3", "n2", hh, ping, 0.2), lossy("n3", "n2", hh, ping, 0.4), lossy("n3", "n2", hh, ping, 0.6)},
		{lossy("n1", "n2", pp, udp, 0.05)},
		{lossy("n1", "n2", pp, iperf, 0.9)},                                   // TCP: no loss figure
		{failure("n2", "n1", pp, udp, failed)},                                // a failure sets nothing
		{lossy("n1", "n3", hh, lat, 0.5)},                                     // qperf: no loss figure
		{lossy("n1", "ext", measurev1.Path_PATH_HOST_TO_EXTERNAL, ping, 0.1)}, // a target, no node
	}
	tests := []struct {
		name    string
		metric  string
		labels  map[string]string
		want    float64
		present bool
	}{
		{"source median over peers", "meshperf_node_loss_ratio", nodeSeries("n2", "src", "ping", "host-host"), 0.2, true},
		{"clean source", "meshperf_node_loss_ratio", nodeSeries("n1", "src", "ping", "host-host"), 0.1, true},
		{"destination", "meshperf_node_loss_ratio", nodeSeries("n2", "dst", "ping", "host-host"), 0.3, true},
		{"clean destination", "meshperf_node_loss_ratio", nodeSeries("n3", "dst", "ping", "host-host"), 0.1, true},
		{"iperf3 UDP", "meshperf_node_loss_ratio", nodeSeries("n2", "dst", "iperf3_udp", "pod-pod"), 0.05, true},
		{"failed UDP sets nothing", "meshperf_node_loss_ratio", nodeSeries("n2", "src", "iperf3_udp", "pod-pod"), 0, false},
		{"iperf3 TCP has none", "meshperf_node_loss_ratio", nodeSeries("n1", "src", "iperf3_tcp", "pod-pod"), 0, false},
		{"qperf has none", "meshperf_node_loss_ratio", nodeSeries("n1", "src", "qperf_tcp_lat", "host-host"), 0, false},
		{"external: the source", "meshperf_node_loss_ratio", nodeSeries("n1", "src", "ping", "host-external"), 0.1, true},
		{"external: no target node", "meshperf_node_loss_ratio", nodeSeries("ext", "dst", "ping", "host-external"), 0, false},
		{"pair: the batch's median", "meshperf_pair_loss_ratio", pair("n3", "n2", "ping", "host-host"), 0.4, true},
		{"pair: clean", "meshperf_pair_loss_ratio", pair("n1", "n3", "ping", "host-host"), 0, true},
	}
	for _, perPair := range []bool{false, true} {
		ctx := testnet.Ctx(t, 30*time.Second)
		m, err := metrics.New(metrics.Config{PerPair: perPair})
		if err != nil {
			t.Fatal(err)
		}
		feedAll(m, batches)
		fams := scrape(t, ctx, serve(t, m))
		if got := fams["meshperf_pair_loss_ratio"] != nil; got != perPair {
			t.Errorf("PerPair %v: meshperf_pair_loss_ratio present = %v", perPair, got)
		}
		for _, tt := range tests {
			if tt.metric == "meshperf_pair_loss_ratio" && !perPair {
				continue
			}
			got, there := value(fams, tt.metric, tt.labels)
			if there != tt.present || (there && !testutil.Near(got, tt.want, 1e-9)) {
				t.Errorf("PerPair %v: %s: %s%v = %v (present %v), want %v (present %v)", perPair, tt.name, tt.metric, tt.labels, got, there, tt.want, tt.present)
			}
		}
	}
}
