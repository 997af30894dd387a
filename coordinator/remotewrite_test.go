package coordinator_test

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/cli"
	"github.com/meshperf/meshperf/coordinator/remotewrite"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	"github.com/meshperf/meshperf/internal/vmtest"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// pingRTT is the RTT the fake agent of node-<src> answers for the target
// 127.0.0.<dst>: src ms plus dst tenths of a ms.
func pingRTT(src, dst int) float64 { return float64(src)*1e-3 + float64(dst)*1e-4 }

// TestRemoteWriteMesh: a coordinator with --remote-write to a real
// VictoriaMetrics runs a ping mesh of three fake agents and takes a probe
// report; every pair's series, each node's, and the probe's arrive with
// their src, dst, test and path labels and values.
func TestRemoteWriteMesh(t *testing.T) {
	vm := vmtest.Start(t)
	c := runAt(t, t.TempDir(), coordinator.Config{
		RemoteWrite: &remotewrite.Config{URL: vm.WriteURL(), BatchWait: 20 * time.Millisecond, FlushTimeout: 10 * time.Second},
		Probes: &agentv1.ProbeSettings{Interval: durationpb.New(time.Second), ReportInterval: durationpb.New(10 * time.Second),
			Timeout: durationpb.New(500 * time.Millisecond), Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP},
			Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}},
	}, nil)
	ctx := testnet.Ctx(t, time.Minute)
	conn := dial(t, c.addr, insecureCreds())
	agents := map[int]*fakeagent.Agent{}
	for i := 1; i <= 3; i++ {
		agents[i] = playAgent(t, ctx, conn, fmt.Sprintf("node-%d", i), fmt.Sprintf("127.0.0.%d", i), func(w *agentv1.Work) *agentv1.WorkResult {
			rc := w.GetRunClient()
			if rc == nil {
				return fakeagent.ServerAnswer(w)
			}
			dst := net.ParseIP(rc.GetTargetIp()).To4()
			rtt := pingRTT(i, int(dst[3]))
			return fakeagent.ClientDone(w.GetWorkId(), &measurev1.Result{Spec: rc.GetSpec(), Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.Now(),
				Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 3, PacketsReceived: 3,
					RttMinSeconds: rtt, RttAvgSeconds: rtt, RttMaxSeconds: rtt, RttMedianSeconds: &rtt}}}).GetWorkResult()
		})
	}
	mesh := meshv1.NewMeshServiceClient(c.socketConn(t))
	var known int
	if !testutil.Within(20*time.Second, 10*time.Millisecond, func() bool {
		resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
		known = len(resp.GetAgents())
		return err == nil && known == 3
	}) {
		t.Fatalf("%d agents registered, want 3\n%s", known, c.logs)
	}
	start := time.Now()
	err := agents[1].Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: &agentv1.ProbeReport{
		Seq: 1, PeriodStart: timestamppb.New(start.Add(-10 * time.Second)), Period: durationpb.New(10 * time.Second), PlanVersion: 1,
		Summaries: []*agentv1.ProbeSummary{{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"}, Path: measurev1.Path_PATH_HOST_TO_HOST,
			Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 10, Received: 10, RttMinSeconds: 0.001, RttMedianSeconds: 0.0012,
			RttP90Seconds: 0.002, RttMaxSeconds: 0.003, Status: measurev1.Status_STATUS_OK}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Stored (and so handed to the remote writer) before the stop below;
	// the run may end before the ingest's batch is written, and a stop
	// cancels the write of a report its agent would send again.
	if !testutil.Within(20*time.Second, 10*time.Millisecond, func() bool {
		resp, err := mesh.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: "node-1", DstNode: "node-2",
			Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, StartTime: timestamppb.New(start.Add(-time.Minute))})
		return err == nil && len(resp.GetSamples()) > 0
	}) {
		t.Fatalf("the probe report was not stored\n%s", c.logs)
	}
	trig, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, Repeats: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var run *measurev1.Run
	if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool {
		resp, err := mesh.GetRun(ctx, &meshv1.GetRunRequest{RunId: trig.GetRun().GetRunId()})
		run = resp.GetRun()
		return err == nil && run.GetState() == measurev1.RunState_RUN_STATE_SUCCEEDED
	}) {
		t.Fatalf("run %v, want it succeeded\n%s", run, c.logs)
	}
	c.stop() // flushes the queue

	got := map[string][]float64{}
	const wantSeries = 3 + 6 + 6 // the probe's, the pairs', the nodes'
	for _, s := range vm.ExportUntil(`{__name__=~"meshperf_(pair|node)_.*"}`, func(ss []vmtest.Series) bool { return len(ss) >= wantSeries }) {
		var ls []string
		for _, k := range []string{"__name__", "src", "dst", "node", "role", "test", "path", "quantile"} {
			if v, ok := s.Metric[k]; ok {
				ls = append(ls, k+"="+v)
			}
		}
		if len(ls) != len(s.Metric) {
			t.Errorf("series with unexpected labels: %v", s.Metric)
		}
		got[strings.Join(ls, ",")] = s.Values
	}
	want := map[string][]float64{
		"__name__=meshperf_pair_loss_ratio,src=node-1,dst=node-2,test=probe_icmp,path=host-host":                   {0},
		"__name__=meshperf_pair_latency_seconds,src=node-1,dst=node-2,test=probe_icmp,path=host-host,quantile=0.5": {0.0012},
		"__name__=meshperf_pair_latency_seconds,src=node-1,dst=node-2,test=probe_icmp,path=host-host,quantile=0.9": {0.002},
	}
	for src := 1; src <= 3; src++ {
		var asSrc, asDst []float64
		for dst := 1; dst <= 3; dst++ {
			if dst == src {
				continue
			}
			want[fmt.Sprintf("__name__=meshperf_pair_latency_seconds,src=node-%d,dst=node-%d,test=ping,path=host-host", src, dst)] = []float64{pingRTT(src, dst)}
			asSrc, asDst = append(asSrc, pingRTT(src, dst)), append(asDst, pingRTT(dst, src))
		}
		want[fmt.Sprintf("__name__=meshperf_node_latency_seconds,node=node-%d,role=src,test=ping,path=host-host", src)] = []float64{(asSrc[0] + asSrc[1]) / 2}
		want[fmt.Sprintf("__name__=meshperf_node_latency_seconds,node=node-%d,role=dst,test=ping,path=host-host", src)] = []float64{(asDst[0] + asDst[1]) / 2}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("VictoriaMetrics lacks %s", k)
			continue
		}
		// The figures agree to 12 significant digits: the node figures are
		// medians computed in float64, as VictoriaMetrics stores them.
		if len(g) != len(w) || (len(g) == 1 && !testutil.Near(g[0], w[0], 1e-12)) {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("VictoriaMetrics has an unexpected series %s = %v", k, got[k])
		}
	}
	if t.Failed() {
		t.Logf("coordinator log:\n%s", c.logs)
	}
}

// TestServeRemoteWriteFlags: serve refuses bad --remote-write flags before
// it starts, naming the flag and the value.
func TestServeRemoteWriteFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--remote-write", "ftp://127.0.0.1/x"}, `--remote-write "ftp://127.0.0.1/x": scheme "ftp": want http or https`},
		{[]string{"--remote-write", "http:///api/v1/write"}, `--remote-write "http:///api/v1/write": not an absolute URL with a host`},
		{[]string{"--remote-write", "127.0.0.1:8428"}, `--remote-write "127.0.0.1:8428"`},
		{[]string{"--remote-write", "http://127.0.0.1:1/api/v1/write", "--remote-write-queue-samples", "0"}, "--remote-write-queue-samples 0"},
		{[]string{"--remote-write-queue-samples", "10"}, "--remote-write-queue-samples needs --remote-write"},
		{[]string{"--remote-write-bearer-token-file", "x"}, "--remote-write-bearer-token-file needs --remote-write"},
		{[]string{"--remote-write", "http://127.0.0.1:1/api/v1/write", "--remote-write-bearer-token-file", filepath.Join(dir, "none")},
			"--remote-write-bearer-token-file"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			cmd := cli.NewCommand(&out, &errb)
			cmd.SetArgs(append([]string{"serve", "--listen", "", "--socket", filepath.Join(dir, "s.sock"), "--metrics-listen", "", "--db", filepath.Join(dir, "m.db")}, tc.args...))
			err := cmd.ExecuteContext(testnet.Ctx(t, 30*time.Second))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("serve %v: %v, want an error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
}
