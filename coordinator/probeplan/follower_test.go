package probeplan

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// await waits for f.C and returns Next's plan, or fails after 30 s.
func await(t *testing.T, f *Follower) *agentv1.ProbePlan {
	t.Helper()
	select {
	case <-f.C():
		return onWire(t, f.Next())
	case <-time.After(30 * time.Second):
		t.Fatal("follower never ready")
		return nil
	}
}

// onWire returns plan as its agent decodes it: the Follower's plans
// carry their upserts pre-encoded, which only the wire shows.
func onWire(t *testing.T, plan *agentv1.ProbePlan) *agentv1.ProbePlan {
	t.Helper()
	if plan == nil {
		return nil
	}
	b, err := proto.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	out := &agentv1.ProbePlan{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	if len(out.ProtoReflect().GetUnknown()) != 0 {
		t.Fatalf("plan on the wire has unknown fields: %x", out.ProtoReflect().GetUnknown())
	}
	return out
}

// TestWirePlans: the Follower's plans (upserts pre-encoded) decode to
// exactly Table.Delta's, for full plans, deltas with upserts and removals,
// and a change that leaves the agent's own entry out.
func TestWirePlans(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	tb.SetSettings(&agentv1.ProbeSettings{PayloadBytes: 56})
	for i := range 5 {
		put(t, tb, testPeer(nodeName(i), i))
	}
	v1 := tb.Revision()
	put(t, tb, testPeer(nodeName(7), 2))
	put(t, tb, testPeer(nodeName(1), 4)) // changed
	tb.Remove(nodeName(2))
	put(t, tb, testPeer(nodeName(0), 3)) // the agent itself
	for _, tt := range []struct {
		name   string
		since  uint64
		change func() // before the plan: a full plan's cached wire form must follow the table
	}{
		{"full", 0, nil},
		{"delta", v1, nil},
		{"delta of the last change only", tb.Revision() - 1, nil},
		{"up to date", tb.Revision(), nil},
		{"full after a change", 0, func() { put(t, tb, testPeer(nodeName(9), 1)) }},
		{"full after a removal", 0, func() { tb.Remove(nodeName(3)) }},
		{"full after the agent's own change", 0, func() { put(t, tb, testPeer(nodeName(0), 1)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.change != nil {
				tt.change()
			}
			want, wantFull := tb.Delta(nodeName(0), tt.since)
			tb.mu.RLock()
			got, gotFull := tb.deltaLocked(nodeName(0), tt.since, true)
			tb.mu.RUnlock()
			if gotFull != wantFull || (got == nil) != (want == nil) {
				t.Fatalf("wire plan full=%v nil=%v; Delta full=%v nil=%v", gotFull, got == nil, wantFull, want == nil)
			}
			if want == nil {
				return
			}
			if len(got.GetUpsert()) != 0 {
				t.Errorf("wire plan has %d decoded upserts; want them pre-encoded", len(got.GetUpsert()))
			}
			if dec := onWire(t, got); !proto.Equal(dec, want) {
				t.Errorf("wire plan decodes to\n%v\nwant\n%v", dec, want)
			}
		})
	}
}

func ready(f *Follower) bool {
	select {
	case <-f.C():
		return true
	default:
		return false
	}
}

func TestFollowerChain(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	put(t, tb, testPeer("a", 1))
	put(t, tb, testPeer("self", 1))
	f := tb.Follow("self", -1) // no debounce
	defer f.Stop()
	held := &replica{}

	plan := await(t, f)
	if plan.GetBaseVersion() != 0 || len(plan.GetUpsert()) != 1 || !inFlight(f, plan) {
		t.Fatalf("first plan %v; want a full plan of one peer, in flight", plan)
	}
	if ready(f) {
		t.Fatal("ready with a plan in flight")
	}
	put(t, tb, testPeer("b", 1)) // while in flight: coalesces into the next
	put(t, tb, testPeer("c", 1))
	if err := Apply(held, plan); err != nil {
		t.Fatal(err)
	}
	if err := f.Acked(&agentv1.PlanAck{Version: held.version}); err != nil || f.Version() != plan.GetVersion() {
		t.Fatalf("Acked: %v, version %d", err, f.Version())
	}
	plan = await(t, f)
	if plan.GetBaseVersion() != held.version || len(plan.GetUpsert()) != 2 {
		t.Fatalf("second plan %v; want a delta of b and c from %d", plan, held.version)
	}
	if err := Apply(held, plan); err != nil {
		t.Fatal(err)
	}
	if err := f.Acked(&agentv1.PlanAck{Version: held.version}); err != nil {
		t.Fatal(err)
	}

	// Its own change: nothing to send, and the version stays.
	put(t, tb, testPeer("self", 2))
	if p := await(t, f); p != nil || f.Version() != held.version {
		t.Fatalf("own change gave %v, version %d; want nil, %d", p, f.Version(), held.version)
	}
	tb.Remove("a")
	plan = await(t, f)
	if plan.GetBaseVersion() != held.version || len(plan.GetRemove()) != 1 {
		t.Fatalf("plan %v; want the removal of a based on %d", plan, held.version)
	}

	// A refused delta: a full plan follows at once.
	if err := f.Acked(&agentv1.PlanAck{Version: held.version, Error: "no"}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("refusal: %v", err)
	}
	plan = await(t, f)
	if plan.GetBaseVersion() != 0 {
		t.Fatalf("after a refused delta: %v; want a full plan", plan)
	}
	// A refused full plan: retried only after a change.
	if err := f.Acked(&agentv1.PlanAck{Error: "no"}); err == nil {
		t.Fatal("refused full plan: no error")
	}
	if ready(f) {
		t.Fatal("a refused full plan is retried without a change")
	}
	put(t, tb, testPeer("d", 1))
	if plan = await(t, f); plan.GetBaseVersion() != 0 {
		t.Fatalf("retry: %v; want a full plan", plan)
	}
	// A wrong version acknowledged: full plan.
	if err := f.Acked(&agentv1.PlanAck{Version: 3}); err == nil {
		t.Fatal("wrong version: no error")
	}
	if plan = await(t, f); plan.GetBaseVersion() != 0 {
		t.Fatalf("after a wrong ack: %v; want a full plan", plan)
	}
	if err := f.Acked(&agentv1.PlanAck{Version: plan.GetVersion()}); err != nil {
		t.Fatal(err)
	}
	if err := f.Acked(&agentv1.PlanAck{Version: plan.GetVersion()}); err == nil {
		t.Fatal("ack without a plan in flight: no error")
	}
}

func TestFollowerDebounceCoalesces(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	f := tb.Follow("self", 50*time.Millisecond)
	defer f.Stop()
	plan := await(t, f) // the first (empty, full) plan goes at once
	if plan == nil || plan.GetBaseVersion() != 0 {
		t.Fatalf("first plan %v", plan)
	}
	if err := f.Acked(&agentv1.PlanAck{Version: plan.GetVersion()}); err != nil {
		t.Fatal(err)
	}

	put(t, tb, testPeer("p-0", 0))
	start := time.Now()
	if p := await(t, f); p != nil { // the change starts the debounce
		t.Fatalf("plan before the debounce: %v", p)
	}
	for i := 1; i < 100; i++ { // a fleet joining within the debounce
		put(t, tb, testPeer(nodeName(i), i))
	}
	plan = await(t, f)
	if waited := time.Since(start); waited < 40*time.Millisecond {
		t.Errorf("plan after %v; want the 50ms debounce", waited)
	}
	if plan.GetBaseVersion() == 0 || len(plan.GetUpsert()) != 100 {
		t.Fatalf("plan with base %d and %d peers; want one delta of 100", plan.GetBaseVersion(), len(plan.GetUpsert()))
	}
}

// inFlight says f's plan in flight is plan.
func inFlight(f *Follower, plan *agentv1.ProbePlan) bool {
	sent, ok := f.InFlight()
	return ok && sent == Sent{Version: plan.GetVersion(), BaseVersion: plan.GetBaseVersion()}
}
