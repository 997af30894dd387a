package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/testresult"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Shorthands for the tests and paths the tests feed.
const (
	ping   = measurev1.Test_TEST_PING
	lat    = measurev1.Test_TEST_QPERF_TCP_LAT
	bw     = measurev1.Test_TEST_QPERF_TCP_BW
	iperf  = measurev1.Test_TEST_IPERF3_TCP
	curl   = measurev1.Test_TEST_HTTP
	hh     = measurev1.Path_PATH_HOST_TO_HOST
	pp     = measurev1.Path_PATH_POD_TO_POD
	ok     = measurev1.Status_STATUS_OK
	failed = measurev1.Status_STATUS_UNREACHABLE
)

// result is an OK result with headline v (testresult.OK).
var result = testresult.OK

// failure is a failed result with status s: no metrics.
func failure(src, dst string, path measurev1.Path, test measurev1.Test, s measurev1.Status) *measurev1.Result {
	return &measurev1.Result{
		TestId: "t1", RunId: "run", SrcNode: src, DstNode: dst, Path: path,
		Spec: &measurev1.TestSpec{Test: test}, Status: s, StartTime: timestamppb.Now(), Message: "no route",
	}
}

// serve starts m on a kernel-chosen loopback port and returns its base URL.
// The server is stopped, and Serve's return checked, when the test ends.
func serve(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, l, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// get fetches url and returns the response with its body open; the body is
// closed when the test ends.
func get(t *testing.T, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// scrape fetches base/metrics and parses the text format.
func scrape(t *testing.T, ctx context.Context, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp := get(t, ctx, base+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels are
// exactly labels, and whether it is there.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func node(n, role, test, path string) map[string]string {
	return map[string]string{"node": n, "role": role, "test": test, "path": path}
}

func nodeStatus(n, role, test, path, status string) map[string]string {
	l := node(n, role, test, path)
	l["status"] = status
	return l
}

func pair(src, dst, test, path string) map[string]string {
	return map[string]string{"src": src, "dst": dst, "test": test, "path": path}
}

// feed is a mesh of 3 nodes, batch by batch as the run manager records
// them (one planned test per batch).
var feed = [][]*measurev1.Result{
	{result("n1", "n2", hh, ping, 0.001)},
	{result("n1", "n3", hh, ping, 0.003)},
	{result("n2", "n1", hh, ping, 0.002)},
	{result("n2", "n3", hh, ping, 0.004)},
	{result("n3", "n1", hh, ping, 0.005)},
	{result("n3", "n2", hh, ping, 0.006)},
	// A later figure of n1->n2 replaces the first; a failure after it
	// changes nothing.
	{result("n1", "n2", hh, ping, 0.007)},
	{failure("n1", "n2", hh, ping, measurev1.Status_STATUS_TIMEOUT)},
	// A qperf sweep: one test, a result per message size; the pair's
	// figure is their median.
	{result("n2", "n3", pp, lat, 10e-6), result("n2", "n3", pp, lat, 20e-6), result("n2", "n3", pp, lat, 60e-6)},
	{result("n1", "n2", pp, iperf, 9.5e9)},
	{result("n1", "n3", pp, iperf, 10e9)},
	{result("n3", "n2", pp, bw, 12.2e9)},
	{result("n2", "n1", pp, curl, 0.0015)},
	// Failures only: counted, never a figure.
	{failure("n3", "n1", pp, iperf, failed)},
	{failure("n3", "n1", pp, iperf, failed)},
}

func feedAll(m *metrics.Metrics, batches [][]*measurev1.Result) int {
	n := 0
	for _, b := range batches {
		m.Recorded(b)
		n += len(b)
	}
	return n
}

func TestFigures(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := feedAll(m, feed)
	m.RunStarted("r1")
	m.RunStarted("r2")
	m.RunEnded("r1", measurev1.RunState_RUN_STATE_FAILED)
	fams := scrape(t, ctx, serve(t, m))

	const (
		latency    = "meshperf_node_latency_seconds"
		throughput = "meshperf_node_throughput_bps"
		results    = "meshperf_node_results_total"
	)
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64 // ignored when absent
		absent bool
	}{
		{"src median of the last figures", latency, node("n1", "src", "ping", "host-host"), 0.005, false}, // median(7ms, 3ms)
		{"dst median", latency, node("n1", "dst", "ping", "host-host"), 0.0035, false},                    // median(2ms, 5ms)
		{"dst median of n3", latency, node("n3", "dst", "ping", "host-host"), 0.0035, false},              // median(3ms, 4ms)
		{"src of n3", latency, node("n3", "src", "ping", "host-host"), 0.0055, false},
		{"qperf sweep: median of the batch", latency, node("n2", "src", "qperf_tcp_lat", "pod-pod"), 20e-6, false},
		{"qperf as destination", latency, node("n3", "dst", "qperf_tcp_lat", "pod-pod"), 20e-6, false},
		{"http total time", latency, node("n1", "dst", "http", "pod-pod"), 0.0015, false},
		{"iperf3 throughput in bit/s", throughput, node("n1", "src", "iperf3_tcp", "pod-pod"), 9.75e9, false},
		{"iperf3 as destination", throughput, node("n2", "dst", "iperf3_tcp", "pod-pod"), 9.5e9, false},
		{"qperf bandwidth", throughput, node("n2", "dst", "qperf_tcp_bw", "pod-pod"), 12.2e9, false},
		{"latency is not a throughput", throughput, node("n1", "src", "ping", "host-host"), 0, true},
		{"throughput is not a latency", latency, node("n1", "src", "iperf3_tcp", "pod-pod"), 0, true},
		{"failures set no figure (src)", throughput, node("n3", "src", "iperf3_tcp", "pod-pod"), 0, true},
		{"failures set no figure (dst)", throughput, node("n1", "dst", "iperf3_tcp", "pod-pod"), 0, true},
		{"failures count by status (src)", results, nodeStatus("n3", "src", "iperf3_tcp", "pod-pod", "unreachable"), 2, false},
		{"failures count by status (dst)", results, nodeStatus("n1", "dst", "iperf3_tcp", "pod-pod", "unreachable"), 2, false},
		{"no ok for a node that only failed", results, nodeStatus("n3", "src", "iperf3_tcp", "pod-pod", "ok"), 0, true},
		{"ok results count", results, nodeStatus("n1", "src", "ping", "host-host", "ok"), 3, false},
		{"a timeout counts apart", results, nodeStatus("n1", "src", "ping", "host-host", "timeout"), 1, false},
		{"every result of a batch counts", results, nodeStatus("n3", "dst", "qperf_tcp_lat", "pod-pod", "ok"), 3, false},
		{"ingested", "meshperf_results_ingested_total", nil, float64(n), false},
		{"runs active", "meshperf_runs_active", nil, 1, false},
		{"runs failed", "meshperf_runs_total", map[string]string{"state": "failed"}, 1, false},
		{"runs succeeded start at 0", "meshperf_runs_total", map[string]string{"state": "succeeded"}, 0, false},
		{"runs canceled start at 0", "meshperf_runs_total", map[string]string{"state": "canceled"}, 0, false},
		{"no agent gauge without Config.Agents", "meshperf_agents_connected", nil, 0, true},
		{"no store gauge without Config.StorePath", "meshperf_store_size_bytes", nil, 0, true},
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
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s is missing", name)
		}
	}
}

func TestPerPair(t *testing.T) {
	tests := []struct {
		name    string
		perPair bool
	}{
		{"default: per-node aggregates only", false},
		{"PerPair", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testnet.Ctx(t, 30*time.Second)
			m, err := metrics.New(metrics.Config{PerPair: tt.perPair})
			if err != nil {
				t.Fatal(err)
			}
			feedAll(m, feed)
			fams := scrape(t, ctx, serve(t, m))
			for _, name := range []string{"meshperf_pair_latency_seconds", "meshperf_pair_throughput_bps"} {
				if got := fams[name] != nil; got != tt.perPair {
					t.Errorf("family %s present = %v, want %v", name, got, tt.perPair)
				}
			}
			if !tt.perPair {
				return
			}
			checks := []struct {
				metric string
				labels map[string]string
				want   float64
			}{
				{"meshperf_pair_latency_seconds", pair("n1", "n2", "ping", "host-host"), 0.007},
				{"meshperf_pair_latency_seconds", pair("n2", "n3", "qperf_tcp_lat", "pod-pod"), 20e-6},
				{"meshperf_pair_throughput_bps", pair("n1", "n3", "iperf3_tcp", "pod-pod"), 10e9},
			}
			for _, c := range checks {
				if got, there := value(fams, c.metric, c.labels); !there || !testutil.Near(got, c.want, 1e-9) {
					t.Errorf("%s%v = %v (present %v), want %v", c.metric, c.labels, got, there, c.want)
				}
			}
			if got, there := value(fams, "meshperf_pair_throughput_bps", pair("n3", "n1", "iperf3_tcp", "pod-pod")); there {
				t.Errorf("a pair that only failed has a figure: %v", got)
			}
		})
	}
}

// mesh is a full mesh of n nodes: ping on host-host and iperf3 on
// pod-pod for every ordered pair, every figure different.
func mesh(n int) [][]*measurev1.Result {
	var out [][]*measurev1.Result
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			src, dst := fmt.Sprintf("node-%d", i), fmt.Sprintf("node-%d", j)
			out = append(out,
				[]*measurev1.Result{result(src, dst, hh, ping, float64(i*n+j)*1e-6)},
				[]*measurev1.Result{result(src, dst, pp, iperf, float64(i*n+j)*1e9)})
		}
	}
	return out
}

// series counts the series of the families whose name starts with prefix.
func series(fams map[string]*dto.MetricFamily, names ...string) int {
	n := 0
	for _, name := range names {
		n += len(fams[name].GetMetric())
	}
	return n
}

func TestSeriesGrowLinearlyWithNodes(t *testing.T) {
	nodeFamilies := []string{"meshperf_node_latency_seconds", "meshperf_node_throughput_bps", "meshperf_node_results_total", "meshperf_node_loss_ratio"}
	pairFamilies := []string{"meshperf_pair_latency_seconds", "meshperf_pair_throughput_bps", "meshperf_pair_loss_ratio"}
	tests := []struct {
		nodes    int
		perPair  bool
		wantNode int // 2 roles x (2 (test, path) x 2 families (figure, results) + 1 ping loss)
		wantPair int // ordered pairs x (2 figures + 1 ping loss)
	}{
		{3, false, 3 * 10, 0},
		{6, false, 6 * 10, 0},
		{3, true, 3 * 10, 3 * 2 * 3},
		{6, true, 6 * 10, 6 * 5 * 3},
	}
	got := map[bool]map[int]int{false: {}, true: {}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d nodes per-pair %v", tt.nodes, tt.perPair), func(t *testing.T) {
			ctx := testnet.Ctx(t, 30*time.Second)
			m, err := metrics.New(metrics.Config{PerPair: tt.perPair})
			if err != nil {
				t.Fatal(err)
			}
			feedAll(m, mesh(tt.nodes))
			fams := scrape(t, ctx, serve(t, m))
			if n := series(fams, nodeFamilies...); n != tt.wantNode {
				t.Errorf("%d per-node series, want %d", n, tt.wantNode)
			}
			if n := series(fams, pairFamilies...); n != tt.wantPair {
				t.Errorf("%d per-pair series, want %d", n, tt.wantPair)
			}
			got[tt.perPair][tt.nodes] = series(fams, nodeFamilies...)
		})
	}
	for _, perPair := range []bool{false, true} {
		if a, b := got[perPair][3], got[perPair][6]; b != 2*a {
			t.Errorf("per-pair %v: %d per-node series for 3 nodes, %d for 6: want twice as many", perPair, a, b)
		}
	}
}

// TestRunManagerFeedsMetrics checks the runs.Observer wiring with a real
// store, registry and run manager: three known nodes without agents, so
// every test fails at once as agent_unavailable.
func TestRunManagerFeedsMetrics(t *testing.T) {
	ctx := testnet.Ctx(t, 60*time.Second)
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, n := range []string{"a", "b", "c"} {
		if err := st.PutAgent(ctx, &storev1.Agent{NodeName: n, LastSeenTime: timestamppb.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(ctx, registry.Config{Recorder: st})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(metrics.Config{Agents: reg, StorePath: st.Path()})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := runs.New(ctx, runs.Config{Store: st, Agents: reg, Observer: m, IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	run, err := mgr.Trigger(ctx, &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{{Test: ping}}, Paths: []measurev1.Path{hh}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := mgr.Watch(ctx, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	for range ch { // until the run ends: the observer has seen everything by then
	}
	fams := scrape(t, ctx, serve(t, m))
	tests := []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"meshperf_results_ingested_total", nil, 6},
		{"meshperf_node_results_total", nodeStatus("a", "src", "ping", "host-host", "agent_unavailable"), 2},
		{"meshperf_node_results_total", nodeStatus("c", "dst", "ping", "host-host", "agent_unavailable"), 2},
		{"meshperf_runs_active", nil, 0},
		{"meshperf_runs_total", map[string]string{"state": "failed"}, 1},
		{"meshperf_agents_known", nil, 3},
		{"meshperf_agents_connected", nil, 0},
	}
	for _, tt := range tests {
		if got, there := value(fams, tt.metric, tt.labels); !there || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.metric, tt.labels, got, there, tt.want)
		}
	}
	if n := series(fams, "meshperf_node_latency_seconds"); n != 0 {
		t.Errorf("%d latency series after failures only, want none", n)
	}
}
