package agent_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestCancelClient: cancel_client kills the client running for its
// test_id (its process is gone) and that client answers STATUS_CANCELED;
// the cancel itself gets no answer, and a cancel for a test that is not
// running (never was, or already canceled) is ignored.
func TestCancelClient(t *testing.T) {
	testnet.Need(t, "ping")
	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	startAgent(t, cfg)
	fs := next()
	fs.accept(t, time.Second, 30*time.Second)
	cancelClient := &agentv1.Work_CancelClient{CancelClient: &agentv1.CancelClient{}}
	long := func(target string) *agentv1.Work_RunClient {
		return &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
			Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{
				Count: 100, Interval: durationpb.New(200 * time.Millisecond)}}}, // 20 s
			Network: measurev1.Network_NETWORK_HOST, TargetIp: target,
		}}
	}
	tests := []struct {
		name string
		// run, if set, is a long client started before the cancel, to
		// this target (one per case, to tell its ping apart).
		run      string
		cancelID string // the cancel's test_id
		// cancels is how many cancels are sent.
		cancels    int
		wantStatus measurev1.Status // of the run's answer
	}{
		{"a test that never ran", "", "ghost", 1, 0},
		{"a running client", "127.0.0.41", "long-1", 1, measurev1.Status_STATUS_CANCELED},
		{"twice", "127.0.0.42", "long-2", 2, measurev1.Status_STATUS_CANCELED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.run != "" {
				fs.send(t, work(tt.cancelID, 60*time.Second, long(tt.run)))
				if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return len(pingsTo(tt.run)) > 0 }) {
					t.Fatal("the client never started")
				}
			}
			for range tt.cancels {
				fs.send(t, work(tt.cancelID, 5*time.Second, cancelClient))
			}
			if tt.run != "" {
				r := fs.result(t, tt.cancelID)
				if r.GetStatus() != tt.wantStatus || r.GetClientDone() == nil || len(r.GetClientDone().GetResults()) != 1 ||
					r.GetClientDone().GetResults()[0].GetStatus() != tt.wantStatus || !strings.Contains(r.GetMessage(), "canceled") {
					t.Errorf("client answered %v %q (%v); want %v with one result", r.GetStatus(), r.GetMessage(), r.GetClientDone(), tt.wantStatus)
				}
				if !testutil.Within(10*time.Second, 20*time.Millisecond, func() bool { return len(pingsTo(tt.run)) == 0 }) {
					t.Errorf("ping processes %v still run after the cancel", pingsTo(tt.run))
				}
			}
			// The next work is answered, and nothing else: result fails
			// the test on an answer to the cancel.
			fs.send(t, work("after-"+tt.cancelID, 30*time.Second, runPing("127.0.0.2")))
			if r := fs.result(t, "after-"+tt.cancelID); r.GetStatus() != measurev1.Status_STATUS_OK {
				t.Errorf("the client after the cancel: %v %q, want OK", r.GetStatus(), r.GetMessage())
			}
		})
	}
}
