package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// The allowlist in config order (not sorted). The addresses are
// documentation ranges that no test ever sends to: the agents are fakes.
var allowlist = []*measurev1.ExternalTarget{
	{Name: "zeta", Address: "192.0.2.1"},
	{Name: "alpha", Address: "lb.example.com", HttpUrl: "https://lb.example.com/healthz", Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766},
}

func withExternal(rc *registry.Config) { rc.ExternalTargets = allowlist }

// externalAnswer answers a Work as an agent that measured an external
// target does (fakeagent.Config.Answer).
func externalAnswer(w *agentv1.Work) *agentv1.WorkResult {
	id := protocol.WorkID(w)
	wr := &agentv1.WorkResult{WorkId: id, Status: measurev1.Status_STATUS_OK}
	rc := w.GetRunClient()
	if rc == nil {
		wr.Status, wr.Message = measurev1.Status_STATUS_INVALID, "this fake only runs clients"
		return wr
	}
	r := &measurev1.Result{Spec: rc.GetSpec(), Status: measurev1.Status_STATUS_OK, TargetAddress: "192.0.2.1",
		DstNode: "forged"} // the coordinator's identity wins
	if rc.GetSpec().GetTest() == measurev1.Test_TEST_HTTP {
		r.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, TotalSeconds: 0.01}}
	} else {
		r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5,
			RttMinSeconds: 0.001, RttAvgSeconds: 0.001, RttMaxSeconds: 0.001}}
	}
	wr.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{r}}}
	return wr
}

// playExternal plays reg's agent, answering as externalAnswer.
func playExternal(t *testing.T, ctx context.Context, c *coordinator, reg *agentv1.Register) *fakeagent.Agent {
	t.Helper()
	return fakeagent.Play(t, ctx, c.agent, reg, fakeagent.Config{Answer: externalAnswer})
}

func TestListExternalTargets(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*registry.Config)
		want []string
	}{
		{"sorted by name", withExternal, []string{"alpha", "zeta"}},
		{"none", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startWith(t, tt.edit)
			resp, err := c.mesh.ListExternalTargets(testnet.Ctx(t, 10*time.Second), &meshv1.ListExternalTargetsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range resp.GetExternalTargets() {
				got = append(got, x.GetName())
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("targets %v, want %v", got, tt.want)
			}
			if want := allowlist[1]; len(got) == 2 && !proto.Equal(resp.GetExternalTargets()[0], want) {
				t.Errorf("alpha = %v, want %v", resp.GetExternalTargets()[0], want)
			}
		})
	}
}

// A run of external targets sends each source agent client work that
// names the target (no server anywhere), stores the results with the
// target's name as dst_node, and fails the pod path of a node without a
// pod endpoint; every agent got the allowlist in its Endpoints.
func TestExternalRun(t *testing.T) {
	c := startWith(t, withExternal)
	ctx := testnet.Ctx(t, 10*time.Second)
	agents := map[string]*fakeagent.Agent{}
	hostOnly := register("node-2")
	hostOnly.Addresses = hostOnly.Addresses[:1]
	hostOnly.Addresses[0].Ip = "127.0.0.3"
	for _, reg := range []*agentv1.Register{register("node-1"), hostOnly} {
		agents[reg.GetNodeName()] = playExternal(t, ctx, c, reg)
	}
	// node-2 has no pod endpoint: it is pending, not in the default mesh,
	// so the run names both nodes in a pair.
	resp, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Repeats: 1, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_HTTP}},
		Paths:           []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL},
		Pairs:           []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "node-2"}},
		ExternalTargets: []string{"zeta", "alpha"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// 2 nodes x (zeta: ping, alpha: ping and HTTP) x 2 paths.
	if got := resp.GetRun().GetTestsPlanned(); got != 12 {
		t.Fatalf("%d tests planned, want 12", got)
	}
	watch, err := c.mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: resp.GetRun().GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	var last *measurev1.Run
	for {
		u, err := watch.Recv()
		if err != nil {
			break
		}
		last = u.GetRun()
	}
	// node-2's 3 pod-external tests fail: it has no pod endpoint.
	if last.GetState() != measurev1.RunState_RUN_STATE_FAILED || last.GetTestsDone() != 12 || last.GetTestsFailed() != 3 {
		t.Errorf("run %v, want FAILED with 12 done, 3 failed", last)
	}
	results, err := c.mesh.ListResults(ctx, &meshv1.ListResultsRequest{RunId: resp.GetRun().GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range results.GetResults() {
		key := fmt.Sprintf("%s->%s %s %s %s", r.GetSrcNode(), r.GetDstNode(), testspec.PathName(r.GetPath()),
			testspec.Name(r.GetSpec().GetTest()), r.GetStatus())
		got[key]++
		if r.GetStatus() == measurev1.Status_STATUS_INVALID && !strings.Contains(r.GetMessage(), `node "node-2" registered no pod endpoint`) {
			t.Errorf("%s: message %q", key, r.GetMessage())
		}
	}
	for _, src := range []string{"node-1", "node-2"} {
		for _, path := range []string{"host-external", "pod-external"} {
			status := "STATUS_OK"
			if src == "node-2" && path == "pod-external" {
				status = "STATUS_INVALID"
			}
			for _, want := range []string{"zeta " + path + " ping", "alpha " + path + " ping", "alpha " + path + " http"} {
				key := src + "->" + want + " " + status
				if got[key] != 1 {
					t.Errorf("%d results %q, want 1 (all: %v)", got[key], key, got)
				}
			}
		}
	}
	run, err := c.mesh.GetRun(ctx, &meshv1.GetRunRequest{RunId: resp.GetRun().GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	pathOf := map[string]measurev1.Path{} // by work test ID
	for _, pt := range run.GetRun().GetPlanned() {
		pathOf[run.GetRun().GetRunId()+"/"+pt.GetTestId()] = pt.GetPath()
	}
	for name, a := range agents {
		if ep := a.Endpoints(); len(ep.GetExternalTargets()) != 2 || ep.GetExternalTargets()[0].GetName() != "alpha" {
			t.Errorf("%s: endpoints %v, want the allowlist", name, ep)
		}
		works := a.Works()
		for _, w := range works {
			rc := w.GetRunClient()
			wantNet := map[measurev1.Path]measurev1.Network{
				measurev1.Path_PATH_HOST_TO_EXTERNAL: measurev1.Network_NETWORK_HOST,
				measurev1.Path_PATH_POD_TO_EXTERNAL:  measurev1.Network_NETWORK_POD,
			}[pathOf[w.GetWorkId()]]
			switch {
			case rc == nil:
				t.Errorf("%s: got %T work; an external test starts no server", name, w.GetAction())
			case rc.GetExternalTarget() != "zeta" && rc.GetExternalTarget() != "alpha":
				t.Errorf("%s: RunClient names target %q", name, rc.GetExternalTarget())
			case rc.GetTargetIp() != "" || rc.GetPort() != 0 || rc.GetDataPort() != 0:
				t.Errorf("%s: RunClient to a target carries an address: %v", name, rc)
			case rc.GetNetwork() != wantNet:
				t.Errorf("%s: %s: network %v, want %v", name, w.GetWorkId(), rc.GetNetwork(), wantNet)
			}
		}
		// node-1: 6 tests; node-2: its 3 host-external ones.
		if want := map[string]int{"node-1": 6, "node-2": 3}[name]; len(works) != want {
			t.Errorf("%s got %d work, want %d", name, len(works), want)
		}
	}
}

func TestExternalRunRefused(t *testing.T) {
	c := startWith(t, withExternal)
	ctx := testnet.Ctx(t, 10*time.Second)
	playExternal(t, ctx, c, register("node-1"))
	for _, tt := range []struct {
		name     string
		spec     *measurev1.RunSpec
		wantCode codes.Code
		wantMsg  string
	}{
		{"unknown target", &measurev1.RunSpec{ExternalTargets: []string{"beta"}}, codes.InvalidArgument, "allowed: alpha, zeta"},
		{"no external path", &measurev1.RunSpec{ExternalTargets: []string{"alpha"}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}},
			codes.InvalidArgument, "no external path"},
		// One node: nothing to measure without external targets...
		{"one node, node paths", &measurev1.RunSpec{}, codes.FailedPrecondition, "a mesh needs 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: tt.spec})
			if status.Code(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %v, want %v with %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
	// ...but enough for them.
	if _, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{Repeats: 1, ExternalTargets: []string{"zeta"}}}); err != nil {
		t.Errorf("one node with an external target: %v", err)
	}
}

// TestTriggerRunMonitorLabel: a client's run cannot carry the continuous
// monitor's label prefix: the alerter would take its findings for the
// mesh's standing verdict (a narrow run labelled monitor-light would
// clear every fault it did not look at).
func TestTriggerRunMonitorLabel(t *testing.T) {
	c := startWith(t, withExternal)
	ctx := testnet.Ctx(t, 10*time.Second)
	playExternal(t, ctx, c, register("node-1"))
	for _, label := range []string{"monitor-light", "monitor-made-up"} {
		_, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{Label: label, ExternalTargets: []string{"zeta"}}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `the prefix "monitor-" is the continuous monitor's`) {
			t.Errorf("label %q: %v, want InvalidArgument naming the prefix", label, err)
		}
	}
	if _, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{Label: "monitored-by-hand", Repeats: 1, ExternalTargets: []string{"zeta"}}}); err != nil {
		t.Errorf("label monitored-by-hand: %v", err)
	}
}
