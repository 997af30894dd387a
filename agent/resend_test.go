package agent_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ack acknowledges workIDs as the coordinator does; legacyAck as one of
// the previous version did, in the deprecated test_ids alone.
func ack(workIDs ...string) *agentv1.ConnectResponse {
	return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ResultAck{ResultAck: &agentv1.ResultAck{WorkIds: workIDs}}}
}

func legacyAck(workIDs ...string) *agentv1.ConnectResponse {
	ack := &agentv1.ResultAck{}
	ack.TestIds = workIDs //nolint:staticcheck // SA1019: a coordinator of the previous version's ack
	return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ResultAck{ResultAck: ack}}
}

// slowPing is a ping that runs about a second.
func slowPing(target string) *agentv1.Work_RunClient {
	return &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Network: measurev1.Network_NETWORK_HOST, TargetIp: target,
		Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{
			Count: 5, Interval: durationpb.New(250 * time.Millisecond)}}}}}
}

// results returns the next n WorkResults, skipping heartbeats.
func (fs *fakeSession) results(t *testing.T, n int) []*agentv1.WorkResult {
	t.Helper()
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	var out []*agentv1.WorkResult
	for len(out) < n {
		select {
		case m, ok := <-fs.msgs:
			if !ok {
				t.Fatalf("the agent ended the session after %d of %d results", len(out), n)
			}
			if r := m.GetWorkResult(); r != nil {
				out = append(out, r)
			}
		case <-timer.C:
			t.Fatalf("%d of %d results within 60 s", len(out), n)
		}
	}
	return out
}

func ids(rs []*agentv1.WorkResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.GetWorkId()
	}
	return out
}

// runAgent runs an agent until the returned stop is called (or the test
// ends); stop waits for Run to return.
func runAgent(t *testing.T, cfg agent.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testnet.Ctx(t, 2*time.Minute))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := agent.Run(ctx, cfg); err != nil {
			t.Errorf("agent.Run: %v", err)
		}
	}()
	stop = func() {
		cancel()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			t.Errorf("agent did not return within 30 s of its context's end")
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestResultsOutliveTheSession: client results the coordinator did not
// acknowledge are sent again, oldest first, before anything else in the
// next session (of this agent, or of the next agent with the same state
// directory); acknowledged ones are not; a client that runs when the
// session drops finishes, and its result goes with the next session.
func TestResultsOutliveTheSession(t *testing.T) {
	testnet.Need(t, "ping")
	tests := []struct {
		name string
		// first runs the first session, whose end is up to the test.
		first func(t *testing.T, fs *fakeSession)
		// restart stops the agent between the sessions and starts another
		// with the same state directory.
		restart bool
		// want are the results the next session gets first, in order.
		want []string
		// wantOK: those results are STATUS_OK (the client was not
		// canceled by the session's end).
		wantOK bool
		// waitLog, if set, is in the agent's log before the next session
		// is accepted.
		waitLog string
	}{
		{"acknowledged results are not sent again", func(t *testing.T, fs *fakeSession) {
			fs.send(t, work("r/t1", 10*time.Second, runPing("127.0.0.1")))
			fs.send(t, work("r/t2", 10*time.Second, runPing("127.0.0.1")))
			fs.results(t, 2)
			fs.send(t, ack("r/t1", "r/t2"))
		}, false, nil, false, ""},
		{"a previous coordinator's acknowledgement (test_ids) counts", func(t *testing.T, fs *fakeSession) {
			fs.send(t, work("r/t1", 10*time.Second, runPing("127.0.0.1")))
			fs.results(t, 1)
			fs.send(t, legacyAck("r/t1"))
		}, false, nil, false, ""},
		{"unacknowledged results are sent again, oldest first", func(t *testing.T, fs *fakeSession) {
			for _, id := range []string{"r/t1", "r/t2", "r/t3"} {
				fs.send(t, work(id, 10*time.Second, runPing("127.0.0.1")))
				fs.results(t, 1)
			}
			fs.send(t, ack("r/t2"))
		}, false, []string{"r/t1", "r/t3"}, true, ""},
		{"a client running when the session drops goes on", func(t *testing.T, fs *fakeSession) {
			fs.send(t, work("r/slow", 20*time.Second, slowPing("127.0.0.1")))
		}, false, []string{"r/slow"}, true, `msg="result spooled until the next session with the coordinator" node=node-a work_id=r/slow`},
		{"the next agent sends them again", func(t *testing.T, fs *fakeSession) {
			fs.send(t, work("r/t1", 10*time.Second, runPing("127.0.0.1")))
			fs.results(t, 1)
		}, true, []string{"r/t1"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, next := sessions(t)
			cfg := baseConfig(t, target, "node-a")
			cfg.StateDir = t.TempDir()
			cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			logs := captureLogs(&cfg)
			stop := runAgent(t, cfg)

			fs := next()
			fs.accept(t, time.Second, 30*time.Second)
			tt.first(t, fs)
			// The ack (if any) is read before the session ends: a marker
			// work answered after it proves it.
			fs.send(t, work("r/marker", 5*time.Second, &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}))
			if r := fs.results(t, 1)[0]; r.GetWorkId() != "r/marker" && !slices.Contains(tt.want, r.GetWorkId()) {
				t.Fatalf("unexpected result %q", r.GetWorkId())
			}
			if tt.restart {
				stop()
				cfg.Logger = nil
				logs = captureLogs(&cfg)
				runAgent(t, cfg)
			} else {
				fs.end <- status.Error(codes.Unavailable, "coordinator restarting")
			}

			again := next()
			if tt.waitLog != "" && !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(logs.String(), tt.waitLog) }) {
				t.Fatalf("the agent's log does not say %q:\n%s", tt.waitLog, logs)
			}
			again.accept(t, time.Second, 30*time.Second)
			// Anything new comes after the spooled results.
			again.send(t, work("r/new", 10*time.Second, runPing("127.0.0.1")))
			got := again.results(t, len(tt.want)+1)
			if want := append(slices.Clone(tt.want), "r/new"); !slices.Equal(ids(got), want) {
				t.Errorf("next session's results %q, want %q", ids(got), want)
			}
			for _, r := range got[:len(tt.want)] {
				if tt.wantOK && r.GetStatus() != measurev1.Status_STATUS_OK {
					t.Errorf("%s: status %v (%s), want OK", r.GetWorkId(), r.GetStatus(), r.GetMessage())
				}
				if _, ok := r.GetOutcome().(*agentv1.WorkResult_ClientDone); !ok || len(r.GetClientDone().GetResults()) == 0 {
					t.Errorf("%s: resent without its results: %v", r.GetWorkId(), r)
				}
			}
			for _, id := range tt.want {
				if !strings.Contains(logs.String(), `msg="result sent" node=node-a work_id=`+id) {
					t.Errorf("the agent's log does not say it sent %s:\n%s", id, logs)
				}
			}
			again.end <- status.Error(codes.Unavailable, "test over")
		})
	}
}
