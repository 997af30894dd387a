package registry_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/server"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// The tests here play agents of the previous protocol version, which
// answer a Work by its test_id alone (they know no work_id), against the
// registry within the real coordinator stack (store, runs, gRPC server)
// over real gRPC on loopback: the registry matches such an answer to the
// work in flight by its test_id, and what matches no work dispatched is
// never taken for an answer, and never stored.

// oldHeartbeat is the registry's heartbeat interval in these tests; the
// fake agents heartbeat twice as often.
const oldHeartbeat = 50 * time.Millisecond

// stack is a coordinator (registry, runs, store and gRPC server) served
// on loopback until the test ends.
type stack struct {
	agent agentv1.AgentServiceClient
	mesh  meshv1.MeshServiceClient
}

// startStack starts a stack on a fresh bbolt file; the test's cleanup
// stops it and waits for its goroutines.
func startStack(t *testing.T) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "meshperf.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // last: after everything that writes to it
	reg, err := registry.New(ctx, registry.Config{Recorder: st, HeartbeatInterval: oldHeartbeat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Shutdown)
	mgr, err := runs.New(ctx, runs.Config{Store: st, Agents: reg, IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) },
		ExternalTargets: reg.ExternalTargets()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	target, _ := testutil.ServeGRPC(t, "tcp", server.New(server.Config{Registry: reg, Runs: mgr, Store: st}).Register)
	conn := testutil.DialGRPC(t, target)
	return &stack{agent: agentv1.NewAgentServiceClient(conn), mesh: meshv1.NewMeshServiceClient(conn)}
}

// oldRegister is the Register of node (host address host, pod address
// pod) in this protocol version: what tells an agent of the previous
// version apart is only how it answers.
func oldRegister(node, host, pod string) *agentv1.Register {
	return &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version, AgentVersion: "old",
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: host},
			{Network: measurev1.Network_NETWORK_POD, Ip: pod},
		}}
}

// pingPair registers node-1 and node-2 on s, each played until ctx ends
// (node-1 answers no client work: the test does), triggers one ping from
// node-1 to node-2 and waits for its client work on node-1. It returns
// node-1's agent, the run's ID and the client Work.
func pingPair(t *testing.T, ctx context.Context, s *stack) (*fakeagent.Agent, string, *agentv1.Work) {
	t.Helper()
	cfg := fakeagent.Config{Heartbeat: oldHeartbeat / 2, Answer: fakeagent.ServerAnswer}
	src := fakeagent.Play(t, ctx, s.agent, oldRegister("node-1", "127.0.0.1", "127.0.0.2"), cfg)
	fakeagent.Play(t, ctx, s.agent, oldRegister("node-2", "127.0.0.3", "127.0.0.4"), cfg)
	trig, err := s.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Pairs: []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "node-2"}}, Repeats: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var w *agentv1.Work
	testutil.EventuallyCtx(t, ctx, 10*time.Millisecond, "node-1's client work", func() bool {
		for _, got := range src.Works() {
			if got.GetRunClient() != nil {
				w = got
				return true
			}
		}
		return false
	})
	return src, trig.GetRun().GetRunId(), w
}

// pingResult is a ping's OK result with rtt (seconds) as every figure.
func pingResult(rtt float64) *measurev1.Result {
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
		Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 3, PacketsReceived: 3,
			RttMinSeconds: rtt, RttAvgSeconds: rtt, RttMaxSeconds: rtt, RttMedianSeconds: &rtt}}}
}

// clientDone is a client answer carrying workID and testID (either ""
// for none) with result.
func clientDone(workID, testID string, result *measurev1.Result) *agentv1.ConnectRequest {
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
		WorkId: workID, TestId: testID, Status: measurev1.Status_STATUS_OK,
		Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{result}}}}}}
}

// runEnded waits until run runID ended (within ctx) and returns it.
func runEnded(t *testing.T, ctx context.Context, s *stack, runID string) *measurev1.Run {
	t.Helper()
	run, err := testutil.RunEnded(ctx, s.mesh, runID, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// allResults lists every result the coordinator stored.
func allResults(t *testing.T, ctx context.Context, s *stack) []*measurev1.Result {
	t.Helper()
	resp, err := s.mesh.ListResults(ctx, &meshv1.ListResultsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetResults()
}

// TestOldAgentAnswerMatchedByTestID: the coordinator sends client work
// with both work_id and the deprecated test_id; the answer of an agent of
// the previous version, which carries the test_id alone, is matched to it
// and stored with the agent's figures, as is the answer of an agent of
// this version (work_id, and test_id too) or of one that sends work_id
// alone.
func TestOldAgentAnswerMatchedByTestID(t *testing.T) {
	const rtt = 1.25e-4
	tests := []struct {
		name   string
		answer func(id string) *agentv1.ConnectRequest
	}{
		{"previous version: test_id only", func(id string) *agentv1.ConnectRequest { return clientDone("", id, pingResult(rtt)) }},
		{"this version: work_id and test_id", func(id string) *agentv1.ConnectRequest { return clientDone(id, id, pingResult(rtt)) }},
		{"work_id only", func(id string) *agentv1.ConnectRequest { return clientDone(id, "", pingResult(rtt)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only turns a hang into a failure
			defer cancel()
			s := startStack(t)
			src, runID, w := pingPair(t, ctx, s)
			if w.GetWorkId() == "" || w.GetTestId() != w.GetWorkId() || !strings.HasPrefix(w.GetWorkId(), runID+"/") {
				t.Fatalf("client work carries work_id %q, test_id %q; want both %s/TEST", w.GetWorkId(), w.GetTestId(), runID)
			}
			if err := src.Send(tt.answer(w.GetWorkId())); err != nil {
				t.Fatal(err)
			}
			run := runEnded(t, ctx, s, runID)
			got := allResults(t, ctx, s)
			if len(got) != 1 {
				t.Fatalf("%d results stored, want the ping's one: %v", len(got), got)
			}
			r := got[0]
			if r.GetRunId()+"/"+r.GetTestId() != w.GetWorkId() || r.GetStatus() != measurev1.Status_STATUS_OK || r.GetPing().GetRttAvgSeconds() != rtt {
				t.Errorf("stored %s/%s %v rtt_avg %v (%s); want %s %v rtt_avg %v: the answer was not matched to its work",
					r.GetRunId(), r.GetTestId(), r.GetStatus(), r.GetPing().GetRttAvgSeconds(), r.GetMessage(), w.GetWorkId(), measurev1.Status_STATUS_OK, rtt)
			}
			if run.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED || run.GetTestsDone() != 1 {
				t.Errorf("run %v with %d tests done, want RUN_STATE_SUCCEEDED with 1", run.GetState(), run.GetTestsDone())
			}
		})
	}
}

// TestUnmatchedAnswerRefused: while node-1's client work waits for its
// answer, node-1 sends an answer whose work_id (or, without one, test_id)
// names no work dispatched to it; then the real answer, by test_id alone.
// The stray answer is not taken for the work's answer (the stored result
// has the real one's figures), is never stored, and is acknowledged once
// its run, if any, is over (sent again until then, as an agent does with
// what is unacknowledged), so that the agent forgets it.
func TestUnmatchedAnswerRefused(t *testing.T) {
	const rtt, strayRTT = 1.25e-4, 9.5e-3
	tests := []struct {
		name string
		// stray is the stray answer's work_id and test_id, given the run
		// and the ID of the work in flight; ack is the ID it is
		// acknowledged by.
		stray func(runID, inFlight string) (workID, testID, ack string)
	}{
		{"unknown run, test_id only", func(_, _ string) (string, string, string) { return "", "run-none/t-1", "run-none/t-1" }},
		{"unknown run, work_id only", func(_, _ string) (string, string, string) { return "run-none/t-1", "", "run-none/t-1" }},
		{"no run's test", func(_, _ string) (string, string, string) { return "", "no-slash", "no-slash" }},
		{"a test its run did not plan, test_id only", func(runID, _ string) (string, string, string) {
			return "", runID + "/t-none", runID + "/t-none"
		}},
		{"work_id of no work, test_id of the work in flight", func(_, inFlight string) (string, string, string) {
			return "run-none/t-1", inFlight, "run-none/t-1"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only turns a hang into a failure
			defer cancel()
			s := startStack(t)
			src, runID, w := pingPair(t, ctx, s)
			id := w.GetWorkId()
			strayWork, strayTest, ack := tt.stray(runID, id)
			stray := clientDone(strayWork, strayTest, pingResult(strayRTT))
			if err := src.Send(stray); err != nil {
				t.Fatal(err)
			}
			if err := src.Send(clientDone("", id, pingResult(rtt))); err != nil {
				t.Fatal(err)
			}
			runEnded(t, ctx, s, runID)
			testutil.EventuallyCtx(t, ctx, 50*time.Millisecond, "the stray answer's acknowledgement", func() bool {
				if src.Acked(ack) {
					return true
				}
				if err := src.Send(stray); err != nil { // as an agent sends again what is unacknowledged
					t.Fatal(err)
				}
				return false
			})
			got := allResults(t, ctx, s)
			if len(got) != 1 {
				t.Fatalf("%d results stored, want the ping's one: %v", len(got), got)
			}
			if r := got[0]; r.GetRunId()+"/"+r.GetTestId() != id || r.GetStatus() != measurev1.Status_STATUS_OK || r.GetPing().GetRttAvgSeconds() != rtt {
				t.Errorf("stored %s/%s %v rtt_avg %v (%s); want %s %v rtt_avg %v (the stray answer's is %v)",
					r.GetRunId(), r.GetTestId(), r.GetStatus(), r.GetPing().GetRttAvgSeconds(), r.GetMessage(), id, measurev1.Status_STATUS_OK, rtt, strayRTT)
			}
		})
	}
}
