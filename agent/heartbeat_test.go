package agent_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// TestHeartbeatProposal: the agent takes the heartbeats a coordinator's
// Heartbeat proposes (it answers at once with the same two values, and
// from then on waits only the new timeout: a coordinator that goes silent
// is dropped long before the Registered timeout of 10 minutes), and
// refuses ones it cannot honor (logged; no answer; the session goes on).
func TestHeartbeatProposal(t *testing.T) {
	propose := func(interval, timeout time.Duration) *agentv1.ConnectResponse {
		return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Heartbeat{Heartbeat: &agentv1.Heartbeat{
			Interval: durationpb.New(interval), Timeout: durationpb.New(timeout)}}}
	}
	for _, c := range []struct {
		name              string
		interval, timeout time.Duration
		taken             bool
		wantLog           string
	}{
		{"taken", 50 * time.Millisecond, 300 * time.Millisecond, true, "no message from the coordinator"},
		{"interval below 10 ms", 5 * time.Millisecond, time.Second, false, "heartbeat change refused"},
		{"timeout below 2 intervals", time.Second, 1500 * time.Millisecond, false, "heartbeat change refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target, next := sessions(t)
			cfg := baseConfig(t, target, "node-1")
			logs := captureLogs(&cfg)
			startAgent(t, cfg)
			fs := next()
			fs.accept(t, time.Second, 10*time.Minute)
			fs.send(t, propose(c.interval, c.timeout))
			// The agent's messages up to its second plain heartbeat: an
			// answer comes at once, before them.
			var answer *agentv1.Heartbeat
			for plain := 0; plain < 2 && answer == nil; {
				select {
				case m, ok := <-fs.msgs:
					if !ok {
						t.Fatalf("the agent ended the session; log:\n%s", logs)
					}
					switch hb := m.GetHeartbeat(); {
					case hb == nil:
					case hb.GetInterval() != nil:
						answer = hb
					default:
						plain++
					}
				case <-time.After(30 * time.Second):
					t.Fatal("no heartbeat from the agent within 30 s")
				}
			}
			if !c.taken {
				if answer != nil {
					t.Fatalf("the agent took %v/%v: %v", c.interval, c.timeout, answer)
				}
				if !strings.Contains(logs.String(), c.wantLog) {
					t.Errorf("log lacks %q:\n%s", c.wantLog, logs)
				}
				return
			}
			if answer == nil || answer.GetInterval().AsDuration() != c.interval || answer.GetTimeout().AsDuration() != c.timeout {
				t.Fatalf("answer %v, want interval %v and timeout %v", answer, c.interval, c.timeout)
			}
			// Silent from here on: the new timeout ends the session.
			if !fs.closed() {
				t.Fatalf("the agent kept a silent coordinator's session for 30 s with a %v timeout", c.timeout)
			}
			testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the agent logs why it dropped the session", func() bool {
				return strings.Contains(logs.String(), c.wantLog)
			})
		})
	}
}
