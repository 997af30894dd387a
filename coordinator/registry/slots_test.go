package registry

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// planAgent registers node on a chanStream served by r and returns the
// stream; its plans arrive on the stream's out channel.
func planAgent(t *testing.T, ctx context.Context, r *Registry, node, ip string) *chanStream {
	t.Helper()
	st := &chanStream{in: make(chan *agentv1.ConnectRequest, 64), out: make(chan *agentv1.ConnectResponse, 64), ctx: ctx}
	go func() { _ = r.Serve(ctx, st) }()
	st.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: &agentv1.Register{
		NodeName: node, ProtocolVersion: protocol.Version, ProbePort: 7947,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip}}}}}
	return st
}

// nextPlan is the next plan on st (other messages skipped); it fails the
// test after 10 s or, with wait false, if none is there at once.
func nextPlan(t *testing.T, st *chanStream, wait bool) *agentv1.ProbePlan {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		var m *agentv1.ConnectResponse
		if wait {
			select {
			case m = <-st.out:
			case <-timeout:
				t.Fatal("no probe plan within 10 s")
			}
		} else {
			select {
			case m = <-st.out:
			default:
				return nil
			}
		}
		if p := m.GetProbePlan(); p != nil {
			return p
		}
	}
}

// waitSlots waits (10 s at most) until n plan slots are taken.
func waitSlots(t *testing.T, r *Registry, n int) {
	t.Helper()
	taken := func() int { return len(r.planSlots) }
	if !testutil.Within(10*time.Second, 5*time.Millisecond, func() bool { return taken() == n }) {
		t.Fatalf("%d plan slots taken, want %d", taken(), n)
	}
}

// TestPlanSlots checks the bound on full plans in flight: a full plan
// holds its slot until the agent acknowledges it, the next agent's full
// plan waits for that slot, and a slot held past PlanSlotHold is given
// back, so that an agent that never answers holds up nobody for long.
func TestPlanSlots(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold time.Duration
	}{{"released by the ack", time.Hour}, {"released after the hold", 50 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			table := probeplan.NewTable(probeplan.Options{})
			table.SetSettings(&agentv1.ProbeSettings{Interval: durationpb.New(time.Second)})
			r, err := New(ctx, Config{Recorder: memRecorder{}, Probes: table, PlanDebounce: time.Hour, PlansInFlight: 1, PlanSlotHold: tc.hold})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Shutdown()
			a := planAgent(t, ctx, r, "node-1", "10.0.0.1")
			pa := nextPlan(t, a, true)
			if pa.GetBaseVersion() != 0 {
				t.Fatalf("node-1's first plan is a delta from %d", pa.GetBaseVersion())
			}
			b := planAgent(t, ctx, r, "node-2", "10.0.0.2")
			if tc.hold == time.Hour {
				waitSlots(t, r, 1)
				// node-1 holds the only slot: node-2 is registered (its
				// Registered went out) but its plan waits.
				deadline := time.Now().Add(10 * time.Second)
				for _, ok := r.Node("node-2"); !ok; _, ok = r.Node("node-2") {
					if time.Now().After(deadline) {
						t.Fatal("node-2 did not register")
					}
					time.Sleep(5 * time.Millisecond)
				}
				// Waiting for the slot, node-2's session still serves it:
				// its heartbeats go out, and no plan.
				timeout := time.After(10 * time.Second)
				for beat := false; !beat; {
					select {
					case m := <-b.out:
						if p := m.GetProbePlan(); p != nil {
							t.Fatalf("node-2 got plan %d while node-1's full plan held the only slot", p.GetVersion())
						}
						beat = m.GetHeartbeat() != nil
					case <-timeout:
						t.Fatal("no heartbeat to node-2 within 10 s while its plan waited for a slot")
					}
				}
				a.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: &agentv1.PlanAck{Version: pa.GetVersion()}}}
			}
			pb := nextPlan(t, b, true)
			if pb.GetBaseVersion() != 0 {
				t.Fatalf("node-2's first plan is a delta from %d", pb.GetBaseVersion())
			}
			b.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: &agentv1.PlanAck{Version: pb.GetVersion()}}}
			if tc.hold == time.Hour {
				waitSlots(t, r, 0)
			}
			t.Logf("node-1 plan %d, node-2 plan %d", pa.GetVersion(), pb.GetVersion())
		})
	}
}
