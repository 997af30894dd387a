package server_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// holdAgent registers reg on c and plays its session until ctx ends: it
// heartbeats, answers server work, keeps its client work in flight (never
// answers it) and records the acknowledgements it gets.
func holdAgent(t *testing.T, ctx context.Context, c *coordinator, reg *agentv1.Register) *fakeagent.Agent {
	t.Helper()
	return fakeagent.Play(t, ctx, c.agent, reg, fakeagent.Config{Heartbeat: heartbeat / 2, Answer: fakeagent.ServerAnswer})
}

// TestLateResultsAfterRestartAreStored: a coordinator stops (a restart)
// while node-1 has its run's client work in flight; the coordinator that
// starts next on the same bbolt file holds the run as interrupted, each
// test a placeholder. node-1 reconnects over real gRPC and sends the
// answers it kept: every one is stored in place of its placeholder with
// its own figures and status (nothing lost), the run's failure count
// follows, and each is acknowledged so the agent can forget it.
func TestLateResultsAfterRestartAreStored(t *testing.T) {
	ping := func(rtt float64) *measurev1.Result {
		return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
			Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 3, PacketsReceived: 3,
				RttMinSeconds: rtt, RttAvgSeconds: rtt, RttMaxSeconds: rtt, RttMedianSeconds: &rtt}}}
	}
	lost := &measurev1.Result{Status: measurev1.Status_STATUS_UNREACHABLE, Message: "3 packets transmitted, 0 received",
		Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}}
	tests := []struct {
		name       string
		answers    []*measurev1.Result // one per test in flight, in the order of their IDs
		wantFailed uint32
	}{
		{"every answer OK", []*measurev1.Result{ping(1e-4), ping(2e-4), ping(3e-4)}, 0},
		{"one answer a failure", []*measurev1.Result{ping(1e-4), lost, ping(3e-4)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "meshperf.db")
			c, stop := startAt(t, db, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // beyond the waits below
			defer cancel()
			first, leave := context.WithCancel(ctx)
			defer leave()
			src := holdAgent(t, first, c, register("node-1"))
			dst := register("node-2")
			dst.Addresses[0].Ip, dst.Addresses[1].Ip = "127.0.0.3", "127.0.0.4"
			holdAgent(t, first, c, dst)
			trig, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
				Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
				Pairs: []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "node-2"}}, Repeats: uint32(len(tt.answers)),
			}})
			if err != nil {
				t.Fatal(err)
			}
			runID := trig.GetRun().GetRunId()
			if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool { return len(src.ClientWork()) == len(tt.answers) }) {
				t.Fatalf("node-1 got client work %v, want %d", src.ClientWork(), len(tt.answers))
			}
			inFlight := src.ClientWork()
			slices.Sort(inFlight)
			leave()
			stop()

			c, _ = startAt(t, db, nil)
			stored := func() map[string]*measurev1.Result { return fakeagent.ResultsByTest(t, ctx, c.mesh, runID) }
			testOf := func(id string) string { return strings.TrimPrefix(id, runID+"/") }
			before := stored()
			for _, id := range inFlight {
				if s := before[testOf(id)].GetStatus(); s != measurev1.Status_STATUS_INTERRUPTED {
					t.Fatalf("after the restart %s is %v, want a STATUS_INTERRUPTED placeholder (results %v)", id, s, before)
				}
			}

			src = holdAgent(t, ctx, c, register("node-1"))
			for i, id := range inFlight {
				if err := src.Send(fakeagent.ClientDone(id, tt.answers[i])); err != nil {
					t.Fatal(err)
				}
			}
			var got map[string]*measurev1.Result
			if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool {
				got = stored()
				for _, id := range inFlight {
					if got[testOf(id)].GetStatus() == measurev1.Status_STATUS_INTERRUPTED {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("late answers not all stored: %v", got)
			}
			for i, id := range inFlight {
				r, want := got[testOf(id)], tt.answers[i]
				if r.GetStatus() != want.GetStatus() || r.GetSrcNode() != "node-1" || r.GetDstNode() != "node-2" ||
					r.GetPing().GetRttAvgSeconds() != want.GetPing().GetRttAvgSeconds() {
					t.Errorf("%s stored as %v %s->%s rtt_avg %v; want %v node-1->node-2 rtt_avg %v", id, r.GetStatus(),
						r.GetSrcNode(), r.GetDstNode(), r.GetPing().GetRttAvgSeconds(), want.GetStatus(), want.GetPing().GetRttAvgSeconds())
				}
			}
			run, err := c.mesh.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
			if err != nil {
				t.Fatal(err)
			}
			if r := run.GetRun(); r.GetTestsDone() != uint32(len(inFlight)) || r.GetTestsFailed() != tt.wantFailed {
				t.Errorf("run: %d done, %d failed; want %d, %d", r.GetTestsDone(), r.GetTestsFailed(), len(inFlight), tt.wantFailed)
			}
			if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool { return src.Acked(inFlight...) }) {
				t.Errorf("late answers %v not all acknowledged: the agent would send them forever", inFlight)
			}
		})
	}
}
