package coordinator_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/cli"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// startBoundsAgent plays a fake agent (fakeagent.Play) that registers
// with a host, a pod and a service address and answers its work with
// answer (nil: canned successes; an answer of nil: never answered).
func startBoundsAgent(t *testing.T, conn *grpc.ClientConn, node, hostIP string, answer func(*agentv1.Work) *agentv1.WorkResult) {
	t.Helper()
	if answer == nil {
		answer = cannedAnswer
	}
	// A pod endpoint and a service IP (documentation addresses: the
	// agents are fakes, nothing is sent there) for every path.
	i := hostIP[strings.LastIndexByte(hostIP, '.')+1:]
	fakeagent.Play(t, t.Context(), agentv1.NewAgentServiceClient(conn), &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version, AgentVersion: "test",
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: hostIP}, {Network: measurev1.Network_NETWORK_POD, Ip: "198.51.100." + i}},
		ServiceIp: "203.0.113." + i, HttpPort: 8080}, fakeagent.Config{Answer: answer})
}

// cannedAnswer answers w with a success: a ping result of 1 ms for a
// client.
func cannedAnswer(w *agentv1.Work) *agentv1.WorkResult {
	wr := &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK}
	switch w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		// The ports the agent registered (the defaults; HTTP 8080).
		st := &agentv1.ServerStarted{Port: 8080, ToolVersion: "fake 1"}
		switch w.GetStartServer().GetTool() {
		case measurev1.Tool_TOOL_IPERF3:
			st.Port = 5201
		case measurev1.Tool_TOOL_QPERF:
			st.Port, st.DataPort = 19765, 19766
		}
		wr.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: st}
	case *agentv1.Work_StopServer:
		wr.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	case *agentv1.Work_RunClient:
		wr.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: okResults(w.GetRunClient().GetSpec())}}
	}
	return wr
}

// okResults are the plausible OK results of spec's test: one per qperf
// message size (with that size, as the runner gives them), else one.
func okResults(spec *measurev1.TestSpec) []*measurev1.Result {
	sizes := spec.GetQperf().GetMsgSizeBytes()
	if len(sizes) == 0 {
		return []*measurev1.Result{okResult(spec)}
	}
	var rs []*measurev1.Result
	for _, size := range sizes {
		one := proto.CloneOf(spec)
		one.GetQperf().MsgSizeBytes = []uint64{size}
		r := okResult(one)
		r.GetQperf().MsgSizeBytes = size
		rs = append(rs, r)
	}
	return rs
}

// okResult is a plausible OK result of spec's test.
func okResult(spec *measurev1.TestSpec) *measurev1.Result {
	r := &measurev1.Result{Spec: spec, Status: measurev1.Status_STATUS_OK, ToolVersion: "fake 1"}
	switch spec.GetTest() {
	case measurev1.Test_TEST_PING:
		r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5, RttMinSeconds: 0.001,
			RttAvgSeconds: 0.001, RttMaxSeconds: 0.001, RttMedianSeconds: proto.Float64(0.001)}}
	case measurev1.Test_TEST_HTTP:
		r.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, TotalSeconds: 0.001}}
	case measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_TCP_BW, measurev1.Test_TEST_QPERF_UDP_LAT, measurev1.Test_TEST_QPERF_UDP_BW:
		r.Metrics = &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{LatencySeconds: 0.0001, ThroughputBps: 1e9}}
	default:
		r.Metrics = &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 1e9, SenderThroughputBps: 1e9}}
	}
	return r
}

// rogueClient answers client work with result as the results' text fields
// say, everything else with canned successes.
func rogueClient(message, toolVersion string) func(*agentv1.Work) *agentv1.WorkResult {
	return func(w *agentv1.Work) *agentv1.WorkResult {
		wr := cannedAnswer(w)
		if rc := w.GetRunClient(); rc != nil {
			wr.Status, wr.Message = measurev1.Status_STATUS_TOOL_ERROR, message
			wr.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{
				Spec: rc.GetSpec(), Status: measurev1.Status_STATUS_TOOL_ERROR, Message: message, ToolVersion: toolVersion}}}}
		}
		return wr
	}
}

// runCLI runs the coordinator command with args against sock and returns
// its stdout, stderr and error.
func runCLI(sock string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(&out, &errOut)
	cmd.SetArgs(append(args, "--coordinator", "unix://"+sock))
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// pingRun triggers a ping run of repeats samples per pair over mesh and
// waits for its end.
func pingRun(t *testing.T, ctx context.Context, mesh meshv1.MeshServiceClient, repeats uint32) *measurev1.Run {
	t.Helper()
	resp, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, Repeats: repeats}})
	if err != nil {
		t.Fatal(err)
	}
	return waitRun(t, ctx, mesh, resp.GetRun().GetRunId())
}

// TestRogueHugeMessage: a rogue agent answers its ping work with 1.2 MiB
// messages. They are stored cut to 4 KiB with the marker (the reason in
// the log), `coordinator results --limit 5` works (5 x 1.2 MiB exceeded
// gRPC's 4 MiB before), and the honest node's results are untouched.
func TestRogueHugeMessage(t *testing.T) {
	addr, sock, logs := start(t, coordinator.Config{})
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	huge := strings.Repeat("A", 1258291) // 1.2 MiB
	// node-1 sorts first: the first 5 results are the rogue's.
	startBoundsAgent(t, conn, "node-1", "127.0.0.1", rogueClient(huge, "ping 1"))
	startBoundsAgent(t, conn, "node-2", "127.0.0.2", nil)
	run := pingRun(t, t.Context(), mesh, 5)
	if run.GetTestsDone() != 10 {
		t.Fatalf("run %v: %d tests done, want 10", run.GetState(), run.GetTestsDone())
	}
	out, errOut, err := runCLI(sock, "results", "--limit", "5", "-o", "json")
	if err != nil {
		t.Fatalf("results --limit 5: %v\n%s", err, errOut)
	}
	if strings.Count(out, "[cut: 1258291 bytes]") != 5 || len(out) > 5*5000 {
		t.Errorf("results --limit 5: %d bytes, %d cut markers; want 5 results of at most 4 KiB", len(out), strings.Count(out, "[cut: 1258291 bytes]"))
	}
	results, err := mesh.ListResults(t.Context(), &meshv1.ListResultsRequest{RunId: run.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	var rogue, honest int
	for _, r := range results.GetResults() {
		switch r.GetSrcNode() {
		case "node-1":
			rogue++
			if len(r.GetMessage()) > 4096 || !strings.HasPrefix(r.GetMessage(), "AAAA") || r.GetStatus() == measurev1.Status_STATUS_OK {
				t.Errorf("rogue result: status %v, message of %d bytes", r.GetStatus(), len(r.GetMessage()))
			}
		case "node-2":
			honest++
			if r.GetStatus() != measurev1.Status_STATUS_OK || r.GetPing().GetRttMinSeconds() != 0.001 {
				t.Errorf("honest result changed: %v", r)
			}
		}
	}
	if rogue != 5 || honest != 5 {
		t.Errorf("%d rogue and %d honest results, want 5 each", rogue, honest)
	}
	if !strings.Contains(logs.String(), "agent answer texts escaped or cut") || !strings.Contains(logs.String(), "(1258291 bytes) escaped or cut to 4096 bytes") {
		t.Errorf("the log does not say the messages were cut:\n%.4000s", logs.String())
	}
}

// TestRogueEscapeSequences: terminal escape sequences and a bidi override
// in a rogue's result message and tool version are stored escaped (the
// reason in the log) and printed escaped by `results`, table and CSV.
func TestRogueEscapeSequences(t *testing.T) {
	tests := []struct {
		name, message, version string
		want                   []string // escaped, in the CSV
	}{
		{"clear screen and title in the message", "\x1b[2J\x1b[H\x1b]0;owned\x07all good", "ping 1", []string{`\x1b[2J\x1b[H\x1b]0;owned\aall good`}},
		{"colour in the tool version", "lost", "ping \x1b[31mred\x1b[0m", []string{`ping \x1b[31mred\x1b[0m`}},
		{"bidi override", "ok\u202edeliaf", "ping\u2066 1", []string{`ok\u202edeliaf`, `ping\u2066 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, sock, logs := start(t, coordinator.Config{})
			conn := dial(t, addr, insecure.NewCredentials())
			mesh := meshv1.NewMeshServiceClient(conn)
			startBoundsAgent(t, conn, "node-1", "127.0.0.1", rogueClient(tt.message, tt.version))
			startBoundsAgent(t, conn, "node-2", "127.0.0.2", nil)
			pingRun(t, t.Context(), mesh, 1)
			table, errOut, err := runCLI(sock, "results")
			if err != nil {
				t.Fatalf("results: %v\n%s", err, errOut)
			}
			csvOut, errOut, err := runCLI(sock, "results", "-o", "csv")
			if err != nil {
				t.Fatalf("results -o csv: %v\n%s", err, errOut)
			}
			for name, out := range map[string]string{"table": table, "csv": csvOut} {
				if i := strings.IndexFunc(out, func(r rune) bool {
					return r == 0x1b || r == 0x07 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
				}); i >= 0 {
					t.Errorf("%s output holds a raw control at byte %d:\n%q", name, i, out)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(csvOut, w) {
					t.Errorf("csv lacks %q:\n%s", w, csvOut)
				}
			}
			if !strings.Contains(logs.String(), "agent answer texts escaped or cut") {
				t.Errorf("the log does not say the texts were escaped:\n%.4000s", logs.String())
			}
		})
	}
}

// TestRogueMadeUpNodes: a rogue registers 60 made-up node names, each
// leaving at once, every third after a probe report the checks refuse
// whole (taken and acknowledged, but no proof of a working agent). The
// default mesh still plans (over the two real nodes only), the made-up
// nodes are forgotten after the unproven grace (the reason in the log),
// and the real nodes' results are as they answered.
func TestRogueMadeUpNodes(t *testing.T) {
	addr, _, logs := start(t, coordinator.Config{UnprovenGrace: 300 * time.Millisecond})
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	startBoundsAgent(t, conn, "node-1", "127.0.0.1", nil)
	startBoundsAgent(t, conn, "node-2", "127.0.0.2", nil)
	for i := range 60 {
		ctx, cancel := context.WithCancel(t.Context())
		node := fmt.Sprintf("made-up-%02d", i)
		st := connect(t, ctx, conn, &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version,
			Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: fmt.Sprintf("127.0.1.%d", i+1)}}})
		if i%3 == 0 {
			garbage := &agentv1.ProbeReport{Seq: 0} // refused whole: seq 0
			if err := st.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: garbage}}); err != nil {
				t.Fatal(err)
			}
			refused := `msg="probe report refused; dropped" node=` + node + " "
			if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { return strings.Contains(logs.String(), refused) }) {
				t.Fatalf("%s's garbage report was not refused:\n%.4000s", node, logs.String())
			}
		}
		cancel()
	}
	agents := func() (connected, all int) {
		resp, err := mesh.ListAgents(t.Context(), &meshv1.ListAgentsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetAgents() {
			if a.GetConnected() {
				connected++
			}
		}
		return connected, len(resp.GetAgents())
	}
	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { c, _ := agents(); return c == 2 }) {
		t.Fatal("the made-up nodes' sessions did not end")
	}
	// The default mesh (every test, every path) plans over the two real
	// nodes: with 62 nodes it was over MaxPlannedTests and refused.
	resp, err := mesh.TriggerRun(t.Context(), &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{}})
	if err != nil {
		t.Fatalf("default mesh: %v", err)
	}
	for _, pt := range resp.GetRun().GetPlanned() {
		if strings.HasPrefix(pt.GetSrcNode(), "made-up") || strings.HasPrefix(pt.GetDstNode(), "made-up") {
			t.Fatalf("a made-up node is in the default mesh: %v", pt)
		}
	}
	run := waitRun(t, t.Context(), mesh, resp.GetRun().GetRunId())
	if run.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Errorf("run ended %v: %s", run.GetState(), run.GetMessage())
	}
	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { _, all := agents(); return all == 2 }) {
		_, all := agents()
		t.Errorf("%d agents known, want the 2 real ones", all)
	}
	if !strings.Contains(logs.String(), "registration expired") || !strings.Contains(logs.String(), "node=made-up-59") {
		t.Errorf("the log does not say the made-up nodes expired:\n%.4000s", logs.String())
	}
}

// TestRogueTooManyRunsAndWatchers: triggers beyond --max-active-runs and
// watchers beyond --max-watchers are refused with RESOURCE_EXHAUSTED and
// the reason, in the answer and in the log; a watcher that left frees its
// place.
func TestRogueTooManyRunsAndWatchers(t *testing.T) {
	addr, _, logs := start(t, coordinator.Config{MaxActiveRuns: 2, MaxWatchers: 2})
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	hold := func(*agentv1.Work) *agentv1.WorkResult { return nil } // runs stay in progress
	startBoundsAgent(t, conn, "node-1", "127.0.0.1", hold)
	startBoundsAgent(t, conn, "node-2", "127.0.0.2", hold)
	spec := &measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}
	var runIDs []string
	for range 2 {
		resp, err := mesh.TriggerRun(t.Context(), &meshv1.TriggerRunRequest{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, resp.GetRun().GetRunId())
	}
	_, err := mesh.TriggerRun(t.Context(), &meshv1.TriggerRunRequest{Spec: spec})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "2 runs are in progress, at most 2") {
		t.Errorf("third trigger: %v, want ResourceExhausted naming the limit", err)
	}
	watch := func(ctx context.Context) (meshv1.MeshService_WatchRunClient, error) {
		w, err := mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: runIDs[0]})
		if err != nil {
			return nil, err
		}
		_, err = w.Recv()
		return w, err
	}
	first, cancelFirst := context.WithCancel(t.Context())
	defer cancelFirst()
	for _, ctx := range []context.Context{first, t.Context()} {
		if _, err := watch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err = watch(t.Context())
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "2 watchers follow runs in progress, at most 2") {
		t.Errorf("third watcher: %v, want ResourceExhausted naming the limit", err)
	}
	cancelFirst()
	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { _, err := watch(t.Context()); return err == nil }) {
		t.Error("a watcher that left did not free its place")
	}
	for _, want := range []string{"run refused: too many runs in progress", "watch refused: too many watchers"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%.4000s", want, logs.String())
		}
	}
	// The runs in progress are untouched by the refusals.
	for _, id := range runIDs {
		got, err := mesh.GetRun(t.Context(), &meshv1.GetRunRequest{RunId: id})
		// Queued (its tests wait for the nodes another run holds) or running.
		if s := got.GetRun().GetState(); err != nil || s != measurev1.RunState_RUN_STATE_RUNNING && s != measurev1.RunState_RUN_STATE_QUEUED {
			t.Errorf("run %s: %v, %v; want it in progress (queued or running)", id, got.GetRun().GetState(), err)
		}
	}
}
