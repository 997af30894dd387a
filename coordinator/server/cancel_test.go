package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// CancelRun refuses an empty or unknown run ID.
func TestCancelRunRefused(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	tests := []struct {
		name  string
		runID string
		want  codes.Code
	}{
		{"empty run_id", "", codes.InvalidArgument},
		{"unknown run", "01NOSUCHRUN", codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.mesh.CancelRun(ctx, &meshv1.CancelRunRequest{RunId: tt.runID}); status.Code(err) != tt.want {
				t.Errorf("CancelRun(%q): %v, want code %v", tt.runID, err, tt.want)
			}
		})
	}
}

// CancelRun over gRPC: the client the source agent runs gets
// cancel_client (same test ID) and answers it; the run ends canceled,
// saying who canceled it, and a second cancel returns it unchanged.
func TestCancelRunStopsTheClient(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	src := startLiveAgent(t, ctx, c, register("node-1"))
	dst := register("node-2")
	dst.Addresses = []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.0.3"}, {Network: measurev1.Network_NETWORK_POD, Ip: "127.0.0.4"}}
	startLiveAgent(t, ctx, c, dst)
	trig, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, Repeats: 1,
		Pairs: []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "node-2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	runID := trig.GetRun().GetRunId()
	find := func(match func(*agentv1.Work) bool) *agentv1.Work {
		for _, w := range src.Works() {
			if match(w) {
				return w
			}
		}
		return nil
	}
	var client *agentv1.Work
	waitUntil(t, ctx, "the client reaches node-1", func() bool {
		client = find(func(w *agentv1.Work) bool { return w.GetRunClient() != nil })
		return client != nil
	}, func() string { return "no run_client" })

	resp, err := c.mesh.CancelRun(ctx, &meshv1.CancelRunRequest{RunId: runID})
	if err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	if resp.GetRun().GetRunId() != runID {
		t.Errorf("CancelRun returned run %q, want %q", resp.GetRun().GetRunId(), runID)
	}
	waitUntil(t, ctx, "cancel_client reaches node-1", func() bool {
		return find(func(w *agentv1.Work) bool { return w.GetCancelClient() != nil && w.GetWorkId() == client.GetWorkId() }) != nil
	}, func() string { return "no cancel_client for " + client.GetWorkId() })
	if err := src.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
		WorkId: client.GetWorkId(), Status: measurev1.Status_STATUS_CANCELED,
		Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{
			Spec: client.GetRunClient().GetSpec(), Status: measurev1.Status_STATUS_CANCELED, Message: "the run was canceled",
			StartTime: timestamppb.Now(), Elapsed: durationpb.New(0), TargetAddress: client.GetRunClient().GetTargetIp(),
		}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	watch, err := c.mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: runID})
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
	if last.GetState() != measurev1.RunState_RUN_STATE_CANCELED || !strings.HasPrefix(last.GetMessage(), "canceled by the client at 127.0.0.1:") {
		t.Errorf("run ended %v %q; want canceled by the client at 127.0.0.1:PORT", last.GetState(), last.GetMessage())
	}
	again, err := c.mesh.CancelRun(ctx, &meshv1.CancelRunRequest{RunId: runID})
	if err != nil || again.GetRun().GetState() != measurev1.RunState_RUN_STATE_CANCELED || again.GetRun().GetMessage() != last.GetMessage() {
		t.Errorf("second CancelRun: %v, %v; want the run unchanged", again.GetRun(), err)
	}
	results, err := c.mesh.ListResults(ctx, &meshv1.ListResultsRequest{RunId: runID})
	if err != nil || len(results.GetResults()) != 1 || results.GetResults()[0].GetStatus() != measurev1.Status_STATUS_CANCELED {
		t.Errorf("ListResults: %v, %v; want the one canceled result", results.GetResults(), err)
	}
}
