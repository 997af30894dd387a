package registry

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/coordinator/membership"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// memRecorder is a Recorder in memory.
type memRecorder struct{}

func (memRecorder) PutAgent(context.Context, *storev1.Agent) error   { return nil }
func (memRecorder) Agents(context.Context) ([]*storev1.Agent, error) { return nil, nil }

// TestGossipEvaluator: a gossip view only reaches the tracker on the
// session's path; the registry's evaluator goroutine finds (and logs) the
// partition that Agents then reports, and Shutdown stops it.
func TestGossipEvaluator(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var logs testutil.SyncBuffer
	r, err := New(context.Background(), Config{Recorder: memRecorder{}, PartitionGrace: -1, GossipSettle: -1,
		GossipEvaluateInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]*session{}
	r.mu.Lock()
	for _, n := range []string{"n1", "n2", "n3"} {
		sessions[n] = &session{node: Node{Name: n}, reporter: true} // never heard from: not live
		r.sessions[n] = sessions[n]
		r.known[n] = &storev1.Agent{NodeName: n, Connected: true}
	}
	running := r.evalDone != nil
	r.mu.Unlock()
	if running {
		t.Fatal("the evaluator runs before any gossip")
	}
	n2Alive := &agentv1.GossipView{Delta: true, Members: []*agentv1.GossipMember{{NodeName: "n2", State: measurev1.GossipState_GOSSIP_STATE_ALIVE}}}
	if err := r.gossipView(sessions["n1"], n2Alive); !errors.Is(err, membership.ErrNoView) {
		t.Errorf("a delta before any whole view: error %v, want membership.ErrNoView", err)
	}
	n2Dead := &agentv1.GossipView{Members: []*agentv1.GossipMember{
		{NodeName: "n1", State: measurev1.GossipState_GOSSIP_STATE_ALIVE}, {NodeName: "n2", State: measurev1.GossipState_GOSSIP_STATE_DEAD},
	}}
	if err := r.gossipView(sessions["n1"], n2Dead); err != nil {
		t.Fatal(err)
	}
	if deadBy, gone := r.GossipGone("n2"); gone {
		t.Errorf("GossipGone(n2) = %v, %v on n1's word alone; want no quorum", deadBy, gone)
	}
	if err := r.gossipView(sessions["n3"], n2Dead); err != nil {
		t.Fatal(err)
	}
	if deadBy, gone := r.GossipGone("n2"); !gone || !slices.Equal(deadBy, []string{"n1", "n3"}) {
		t.Errorf("GossipGone(n2) = %v, %v; want dead by n1 and n3 at once", deadBy, gone)
	}
	// n2's session is live: gossip alone does not take it out.
	n2 := sessions["n2"]
	n2.hb.Store(&heartbeatParams{interval: time.Hour, timeout: 3 * time.Hour})
	n2.touch(time.Now())
	if deadBy, gone := r.GossipGone("n2"); gone {
		t.Errorf("GossipGone(n2) = %v, %v with a live session; want kept", deadBy, gone)
	}
	n2.touch(time.Time{})
	const want = "the coordinator is connected to n2, but the gossip of n1, n3 declares it dead"
	deadline := time.Now().Add(10 * time.Second) // only turns a hang into a failure
	for {
		var got string
		for _, a := range r.Agents() {
			if a.GetNodeName() == "n2" {
				got = a.GetPartition()
			}
		}
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2's partition = %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "partition between the coordinator and gossip") {
		t.Errorf("no partition logged:\n%s", logs.String())
	}
	if err := r.gossipView(sessions["n1"], n2Alive); err != nil {
		t.Fatal(err)
	}
	if deadBy, gone := r.GossipGone("n2"); gone { // one of two: no majority
		t.Errorf("after n1's delta, GossipGone(n2) = %v, %v; want alive", deadBy, gone)
	}
	r.mu.Lock()
	clear(r.sessions) // sessions without streams: nothing to end
	r.mu.Unlock()
	r.Shutdown()
	r.Shutdown()
	r.kickGossip() // after Shutdown: starts nothing
}
