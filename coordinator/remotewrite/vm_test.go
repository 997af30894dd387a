package remotewrite

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/vmtest"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// waitStats waits (60 s at most) until ok(w.Stats()).
func waitStats(t *testing.T, w *Writer, what string, ok func(Stats) bool) {
	t.Helper()
	if !testutil.Within(60*time.Second, 5*time.Millisecond, func() bool { return ok(w.Stats()) }) {
		t.Fatalf("not %s within 60 s: %+v", what, w.Stats())
	}
}

// exported is an export keyed by its sorted name=value labels.
func exported(ss []vmtest.Series) map[string][]gotSample {
	out := map[string][]gotSample{}
	for _, s := range ss {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(s.Metric)) {
			ls = append(ls, k+"="+s.Metric[k])
		}
		key := strings.Join(ls, ",")
		for i, v := range s.Values {
			out[key] = append(out[key], gotSample{v: v, ts: s.Timestamps[i]})
		}
	}
	return out
}

// gathered is the value of the remote-write metric name{labels} in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name, labels string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if strings.Join(ls, ",") != labels {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s} gathered", name, labels)
	return 0
}

// TestVictoriaMetrics sends through the queue to a real VictoriaMetrics and
// reads the series back: (a) labels and values, (b) an outage within the
// queue's bound loses nothing, (c) beyond it exactly the overflow is
// dropped, the oldest queued, and counted.
func TestVictoriaMetrics(t *testing.T) {
	vm := vmtest.Start(t)
	const capacity, batch = 50, 10
	cfg := fastConfig(vm.WriteURL())
	cfg.QueueSamples, cfg.BatchSamples, cfg.MaxBackoff = capacity, batch, 50*time.Millisecond
	cfg.Logger = testutil.Logger(t) // the writer's goroutines may log after the test
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	stop := runWriter(t, w)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	t1 := base.Add(time.Second)

	// (a) A run's results and a probe report.
	w.RunStarted("run")
	w.Recorded([]*measurev1.Result{
		result("node-a", "node-b", hh, ping, 0.00123, base),
		result("node-b", "node-a", hh, ping, 0.00321, t1),
	})
	w.Recorded([]*measurev1.Result{result("node-a", "node-b", pp, iperf, 9.41e9, base)})
	w.RunEnded("run", measurev1.RunState_RUN_STATE_SUCCEEDED)
	w.Reports([]series.Report{{Src: "node-a", Start: t1, Period: 10 * time.Second, Summaries: []series.Summary{
		{Dst: "node-b", Path: pp, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 20, Received: 19,
			RTTMedian: 250 * time.Microsecond, RTTP90: 400 * time.Microsecond, Status: measurev1.Status_STATUS_TIMEOUT},
	}}})
	const phaseA = 2 + 4 + 1 + 2 + 3 // ping's pairs and nodes, iperf3's, the probe's 3
	waitStats(t, w, "sent to VictoriaMetrics", func(s Stats) bool { return s.Sent == phaseA })
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	want := map[string][]gotSample{
		"__name__=meshperf_pair_latency_seconds,dst=node-b,path=host-host,src=node-a,test=ping":                  {{0.00123, ms(base)}},
		"__name__=meshperf_pair_latency_seconds,dst=node-a,path=host-host,src=node-b,test=ping":                  {{0.00321, ms(t1)}},
		"__name__=meshperf_node_latency_seconds,node=node-a,path=host-host,role=src,test=ping":                   {{0.00123, ms(base)}},
		"__name__=meshperf_node_latency_seconds,node=node-b,path=host-host,role=dst,test=ping":                   {{0.00123, ms(base)}},
		"__name__=meshperf_node_latency_seconds,node=node-b,path=host-host,role=src,test=ping":                   {{0.00321, ms(t1)}},
		"__name__=meshperf_node_latency_seconds,node=node-a,path=host-host,role=dst,test=ping":                   {{0.00321, ms(t1)}},
		"__name__=meshperf_pair_throughput_bps,dst=node-b,path=pod-pod,src=node-a,test=iperf3_tcp":               {{9.41e9, ms(base)}},
		"__name__=meshperf_node_throughput_bps,node=node-a,path=pod-pod,role=src,test=iperf3_tcp":                {{9.41e9, ms(base)}},
		"__name__=meshperf_node_throughput_bps,node=node-b,path=pod-pod,role=dst,test=iperf3_tcp":                {{9.41e9, ms(base)}},
		"__name__=meshperf_pair_loss_ratio,dst=node-b,path=pod-pod,src=node-a,test=probe_icmp":                   {{0.05, ms(t1)}},
		"__name__=meshperf_pair_latency_seconds,dst=node-b,path=pod-pod,quantile=0.5,src=node-a,test=probe_icmp": {{0.00025, ms(t1)}},
		"__name__=meshperf_pair_latency_seconds,dst=node-b,path=pod-pod,quantile=0.9,src=node-a,test=probe_icmp": {{0.0004, ms(t1)}},
	}
	all := vm.ExportUntil(`{__name__=~"meshperf_.*"}`, func(ss []vmtest.Series) bool { return len(ss) >= len(want) })
	if diff := cmp.Diff(want, exported(all), cmp.AllowUnexported(gotSample{})); diff != "" {
		t.Fatalf("VictoriaMetrics holds (-want +got):\n%s", diff)
	}

	// (b) An outage: fewer samples than the queue holds are kept, and
	// sent once VictoriaMetrics is back.
	vm.Stop()
	before := w.Stats().Requests
	outageB := base.Add(10 * time.Minute)
	w.Reports(lossReports("node-a", "node-b", 30, outageB))
	waitStats(t, w, "retrying", func(s Stats) bool { return s.Retries > 0 && s.Requests > before+1 })
	vm.Restart()
	waitStats(t, w, "sent after the outage", func(s Stats) bool { return s.Sent == phaseA+30 })
	if st := w.Stats(); st.Dropped != 0 {
		t.Errorf("outage within the bound dropped %d samples", st.Dropped)
	}
	count := func(ss []vmtest.Series) int {
		n := 0
		for _, s := range ss {
			n += len(s.Values)
		}
		return n
	}
	got := exported(vm.ExportUntil(`meshperf_pair_loss_ratio{src="node-a",dst="node-b",path="host-host"}`,
		func(ss []vmtest.Series) bool { return count(ss) >= 30 }))[lossSeries("node-a", "node-b")]
	if len(got) != 30 {
		t.Fatalf("after the outage VictoriaMetrics holds %d of the 30 samples", len(got))
	}
	for i, s := range got {
		if want := ms(outageB.Add(time.Duration(i) * time.Second)); s.ts != want || s.v != 1 {
			t.Errorf("sample %d: %v at %d, want 1 at %d", i, s.v, s.ts, want)
		}
	}

	// (c) Beyond the bound: one batch in flight, the queue full, and
	// exactly the overflow dropped, the oldest queued first.
	vm.Stop()
	outageC := base.Add(20 * time.Minute)
	w.Reports(lossReports("node-a", "node-c", 5, outageC))
	waitStats(t, w, "in flight", func(s Stats) bool { return s.InFlight == 5 && s.Queued == 0 })
	const overflow = 35
	w.Reports(lossReports("node-a", "node-c", capacity+overflow, outageC.Add(time.Minute)))
	if st := w.Stats(); st.QueueFull != overflow || st.Queued != capacity {
		t.Errorf("after %d more: %d dropped, %d queued; want %d and %d", capacity+overflow, st.QueueFull, st.Queued, overflow, capacity)
	}
	vm.Restart()
	waitStats(t, w, "sent after the overflow", func(s Stats) bool { return s.Sent == phaseA+30+5+capacity })
	stop()
	st := w.Stats()
	if st.Dropped != overflow || st.Failed != 0 {
		t.Errorf("stats %+v: want exactly %d dropped, none failed", st, overflow)
	}
	got = exported(vm.ExportUntil(`meshperf_pair_loss_ratio{src="node-a",dst="node-c"}`,
		func(ss []vmtest.Series) bool { return count(ss) >= 5+capacity }))[lossSeries("node-a", "node-c")]
	var wantTS []int64
	for i := range 5 {
		wantTS = append(wantTS, ms(outageC.Add(time.Duration(i)*time.Second)))
	}
	for i := overflow; i < capacity+overflow; i++ {
		wantTS = append(wantTS, ms(outageC.Add(time.Minute+time.Duration(i)*time.Second)))
	}
	var gotTS []int64
	for _, s := range got {
		gotTS = append(gotTS, s.ts)
	}
	if diff := cmp.Diff(wantTS, gotTS); diff != "" {
		t.Errorf("kept samples' times (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"meshperf_remote_write_samples_total", "outcome=sent", float64(phaseA + 30 + 5 + capacity)},
		{"meshperf_remote_write_samples_total", "outcome=dropped", overflow},
		{"meshperf_remote_write_samples_total", "outcome=failed", 0},
		{"meshperf_remote_write_dropped_samples_total", "reason=queue_full", overflow},
		{"meshperf_remote_write_queue_samples", "", 0},
		{"meshperf_remote_write_queue_capacity", "", capacity},
		{"meshperf_remote_write_retries_total", "", float64(st.Retries)},
	} {
		if got := gathered(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := gathered(t, reg, "meshperf_remote_write_requests_total", "code=204"); got < 1 {
		t.Errorf("requests_total{code=204} = %v, want VictoriaMetrics' answers counted", got)
	}
	if got := gathered(t, reg, "meshperf_remote_write_last_success_timestamp_seconds", ""); got < float64(base.Unix()) {
		t.Errorf("last success %v, before the test", got)
	}
	t.Logf("stats %+v", st)
}
