package remotewrite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/testresult"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	hh    = measurev1.Path_PATH_HOST_TO_HOST
	pp    = measurev1.Path_PATH_POD_TO_POD
	hx    = measurev1.Path_PATH_HOST_TO_EXTERNAL
	ping  = measurev1.Test_TEST_PING
	iperf = measurev1.Test_TEST_IPERF3_TCP
)

// t0 is the tests' timestamps' origin.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// result is an OK result with headline v (testresult.OK) that started
// at start.
func result(src, dst string, path measurev1.Path, test measurev1.Test, v float64, start time.Time) *measurev1.Result {
	r := testresult.OK(src, dst, path, test, v)
	r.StartTime = timestamppb.New(start)
	return r
}

// fastConfig is a config for url that sends at once and retries soon.
func fastConfig(url string) Config {
	return Config{URL: url, BatchWait: time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		FlushTimeout: 5 * time.Second, Timeout: 5 * time.Second}
}

// runWriter starts w.Run; the returned stop ends it and waits.
func runWriter(t *testing.T, w *Writer) (stop func()) {
	t.Helper()
	return testutil.Run(t, context.Background(), "Run", nil, w.Run)
}

func TestWriterSendsResultsAndProbes(t *testing.T) {
	rcv := newReceiver(t)
	token := testutil.TokenFile(t, "s3cret")
	cfg := fastConfig(rcv.url)
	cfg.BearerTokenFile = token
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runWriter(t, w)
	t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
	w.RunStarted("run")
	w.Recorded([]*measurev1.Result{
		result("a", "b", hh, ping, 0.001, t0),
		result("a", "c", hh, ping, 0.002, t1),
		result("b", "a", hh, ping, 0.004, t2),
		{SrcNode: "c", DstNode: "a", Path: hh, Spec: &measurev1.TestSpec{Test: ping}, Status: measurev1.Status_STATUS_UNREACHABLE},
	})
	w.Recorded([]*measurev1.Result{result("a", "b", pp, iperf, 9.4e8, t0)})
	w.Recorded([]*measurev1.Result{result("a", "example.org", hx, ping, 0.02, t0)})
	w.RunEnded("run", measurev1.RunState_RUN_STATE_SUCCEEDED)
	late := result("c", "b", hh, ping, 0.005, t0)
	late.RunId = "ended" // a late result: its pair sample only
	w.Recorded([]*measurev1.Result{late})
	w.Reports([]series.Report{{Src: "a", Start: t2, Period: 10 * time.Second, Summaries: []series.Summary{
		{Dst: "b", Path: hh, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 10, Received: 8,
			RTTMedian: time.Millisecond, RTTP90: 3 * time.Millisecond, Status: measurev1.Status_STATUS_TIMEOUT},
		{Dst: "c", Path: pp, Kind: measurev1.ProbeKind_PROBE_KIND_TCP, Sent: 4, Received: 0, Status: measurev1.Status_STATUS_UNREACHABLE},
		{Dst: "d", Path: hh, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 0},
		{Dst: "e", Path: hh, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 5, Received: 5, Status: measurev1.Status_STATUS_INVALID},
	}}})
	stop()
	rcv.check(t)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	pair := func(name, src, dst, path, test string) string {
		return fmt.Sprintf("__name__=%s,dst=%s,path=%s,src=%s,test=%s", name, dst, path, src, test)
	}
	node := func(name, n, role, path, test string) string {
		return fmt.Sprintf("__name__=%s,node=%s,path=%s,role=%s,test=%s", name, n, path, role, test)
	}
	want := map[string][]gotSample{
		pair("meshperf_pair_latency_seconds", "a", "b", "host-host", "ping"):   {{0.001, ms(t0)}},
		pair("meshperf_pair_latency_seconds", "a", "c", "host-host", "ping"):   {{0.002, ms(t1)}},
		pair("meshperf_pair_latency_seconds", "b", "a", "host-host", "ping"):   {{0.004, ms(t2)}},
		pair("meshperf_pair_latency_seconds", "c", "b", "host-host", "ping"):   {{0.005, ms(t0)}},
		node("meshperf_node_latency_seconds", "a", "src", "host-host", "ping"): {{0.0015, ms(t1)}},
		node("meshperf_node_latency_seconds", "b", "dst", "host-host", "ping"): {{0.001, ms(t0)}},
		node("meshperf_node_latency_seconds", "c", "dst", "host-host", "ping"): {{0.002, ms(t1)}},
		node("meshperf_node_latency_seconds", "b", "src", "host-host", "ping"): {{0.004, ms(t2)}},
		node("meshperf_node_latency_seconds", "a", "dst", "host-host", "ping"): {{0.004, ms(t2)}},

		pair("meshperf_pair_throughput_bps", "a", "b", "pod-pod", "iperf3_tcp"):   {{9.4e8, ms(t0)}},
		node("meshperf_node_throughput_bps", "a", "src", "pod-pod", "iperf3_tcp"): {{9.4e8, ms(t0)}},
		node("meshperf_node_throughput_bps", "b", "dst", "pod-pod", "iperf3_tcp"): {{9.4e8, ms(t0)}},

		pair("meshperf_pair_latency_seconds", "a", "example.org", "host-external", "ping"): {{0.02, ms(t0)}},
		node("meshperf_node_latency_seconds", "a", "src", "host-external", "ping"):         {{0.02, ms(t0)}},

		pair("meshperf_pair_loss_ratio", "a", "b", "host-host", "probe_icmp"):                            {{0.2, ms(t2)}},
		"__name__=meshperf_pair_latency_seconds,dst=b,path=host-host,quantile=0.5,src=a,test=probe_icmp": {{0.001, ms(t2)}},
		"__name__=meshperf_pair_latency_seconds,dst=b,path=host-host,quantile=0.9,src=a,test=probe_icmp": {{0.003, ms(t2)}},
		pair("meshperf_pair_loss_ratio", "a", "c", "pod-pod", "probe_tcp"):                               {{1, ms(t2)}},
	}
	if diff := cmp.Diff(want, rcv.samples(), cmp.AllowUnexported(gotSample{})); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	st := w.Stats()
	if wantSent := int64(18); st.Sent != wantSent || st.Dropped != 0 || st.Failed != 0 {
		t.Errorf("stats %+v, want %d sent, none dropped or failed", st, wantSent)
	}
	for _, a := range rcv.auth {
		if a != "Bearer s3cret" {
			t.Errorf("Authorization %q, want the token file's", a)
		}
	}
}
