package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// chanStream is a Stream whose agent side is a pair of channels.
type chanStream struct {
	in  chan *agentv1.ConnectRequest  // agent -> coordinator
	out chan *agentv1.ConnectResponse // coordinator -> agent
	ctx context.Context
}

func (c *chanStream) Send(m *agentv1.ConnectResponse) error {
	select {
	case c.out <- m:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

func (c *chanStream) Recv() (*agentv1.ConnectRequest, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.ctx.Done():
		return nil, io.EOF
	}
}

// probingSession starts a registry with a probe table and plans held back
// for an hour, and a session on a channel stream in which node-1, with a
// probe port, has sent its Register; served gets Serve's end. The
// registry is shut down when the test ends.
func probingSession(t *testing.T, ctx context.Context) (*Registry, *probeplan.Table, *chanStream, <-chan error) {
	t.Helper()
	table := probeplan.NewTable(probeplan.Options{})
	table.SetSettings(&agentv1.ProbeSettings{Interval: durationpb.New(time.Second)})
	r, err := New(ctx, Config{Recorder: memRecorder{}, Probes: table, PlanDebounce: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Shutdown)
	st := &chanStream{in: make(chan *agentv1.ConnectRequest, 64), out: make(chan *agentv1.ConnectResponse, 64), ctx: ctx}
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, st) }()
	st.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: &agentv1.Register{
		NodeName: "node-1", ProtocolVersion: protocol.Version, ProbePort: 7947,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "10.0.0.1"}}}}}
	return r, table, st, served
}

// TestWorkAndPlans checks how work and probe plans are ordered on a
// session: work waits for the plan that names the peers registered before
// it, and an agent that refuses its plans still gets its work (it would
// otherwise wait forever).
func TestWorkAndPlans(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
	}{{"plans taken", false}, {"plans refused", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r, table, st, served := probingSession(t, ctx)
			// The agent: answers plans (taking or refusing them), work at once.
			var plans []*agentv1.ProbePlan
			workSeen := make(chan *agentv1.Work, 1)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case m := <-st.out:
						switch msg := m.GetMsg().(type) {
						case *agentv1.ConnectResponse_ProbePlan:
							plans = append(plans, decodePlan(t, msg.ProbePlan))
							ack := &agentv1.PlanAck{Version: msg.ProbePlan.GetVersion()}
							if tc.refuse {
								ack = &agentv1.PlanAck{Error: "refused"}
							}
							st.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: ack}}
						case *agentv1.ConnectResponse_Work:
							workSeen <- msg.Work
							st.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
								WorkId: msg.Work.GetWorkId(), Status: measurev1.Status_STATUS_OK,
								Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{}}}}}
						}
					}
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for _, ok := r.Node("node-1"); !ok; _, ok = r.Node("node-1") {
				if time.Now().After(deadline) {
					t.Fatal("node-1 did not register")
				}
				time.Sleep(5 * time.Millisecond)
			}
			// A peer joins; the hour-long debounce would hold its delta back.
			if _, _, err := table.Upsert(probeplan.Peer{Name: "node-2", HostIP: netip.MustParseAddr("10.0.0.2"), ProbePort: 7947}); err != nil {
				t.Fatal(err)
			}
			dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
			defer dcancel()
			wr, err := r.Dispatch(dctx, "node-1", &agentv1.Work{WorkId: "run/t1", Action: &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{}}})
			if err != nil || wr.GetStatus() != measurev1.Status_STATUS_OK {
				t.Fatalf("Dispatch = %v, %v; want the work answered", wr, err)
			}
			<-workSeen
			if tc.refuse {
				return
			}
			named := false
			for _, p := range plans {
				for _, u := range p.GetUpsert() {
					named = named || u.GetNodeName() == "node-2"
				}
			}
			if !named {
				t.Errorf("the work went out before a plan named node-2: plans %v", plans)
			}
			cancel()
			if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("Serve: %v", err)
			}
		})
	}
}

// TestHeldWorkNobodyAwaits: work held for a plan the agent has not
// acknowledged is dropped when its caller gives up, so an agent that
// leaves its plan unacknowledged neither makes the held work grow with
// every dispatch nor gets a burst of stale work when it acknowledges at
// last: it gets only the work whose caller still waits.
func TestHeldWorkNobodyAwaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, _, st, served := probingSession(t, ctx)
	// The agent keeps its plan unacknowledged until ack is closed.
	ack := make(chan struct{})
	works := make(chan string, 256)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		var version uint64
		pending := false
		for {
			var ackC chan struct{}
			if pending {
				ackC = ack
			}
			select {
			case <-ctx.Done():
				return
			case <-ackC:
				st.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_PlanAck{PlanAck: &agentv1.PlanAck{Version: version}}}
				pending = false
			case m := <-st.out:
				switch msg := m.GetMsg().(type) {
				case *agentv1.ConnectResponse_ProbePlan:
					version, pending = msg.ProbePlan.GetVersion(), true
				case *agentv1.ConnectResponse_Work:
					works <- msg.Work.GetWorkId()
					st.in <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
						WorkId: msg.Work.GetWorkId(), Status: measurev1.Status_STATUS_OK,
						Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{}}}}}
				}
			}
		}
	}()
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "node-1 registered", func() bool { _, ok := r.Node("node-1"); return ok })
	const abandoned = 50
	for i := range abandoned {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_, err := r.Dispatch(dctx, "node-1", clientWork(fmt.Sprintf("run/gone-%d", i)))
		dcancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dispatch of run/gone-%d while the plan is unacknowledged = %v, want its deadline", i, err)
		}
	}
	answered := make(chan error, 1)
	go func() {
		_, err := r.Dispatch(ctx, "node-1", clientWork("run/live"))
		answered <- err
	}()
	testutil.Eventually(t, 10*time.Second, time.Millisecond, "run/live dispatched", func() bool {
		r.mu.Lock()
		s := r.sessions["node-1"]
		r.mu.Unlock()
		return s != nil && s.awaited(clientWork("run/live"))
	})
	close(ack)
	if err := <-answered; err != nil {
		t.Fatalf("Dispatch of run/live = %v", err)
	}
	cancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Serve: %v", err)
	}
	<-agentDone
	close(works)
	var got []string
	for id := range works {
		got = append(got, id)
	}
	if len(got) != 1 || got[0] != "run/live" {
		t.Errorf("the agent got work %v after it acknowledged, want only run/live", got)
	}
}

// knownRecorder holds agents recorded before a restart.
type knownRecorder struct{ agents []*storev1.Agent }

func (knownRecorder) PutAgent(context.Context, *storev1.Agent) error { return nil }
func (k knownRecorder) Agents(context.Context) ([]*storev1.Agent, error) {
	return k.agents, nil
}

// TestIsPeerAfterRestart: right after a restart no agent has registered
// again, and the reports they send again name their peers: a node known
// from the store is a peer, a name never seen is not.
func TestIsPeerAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := New(ctx, Config{Recorder: knownRecorder{[]*storev1.Agent{{NodeName: "node-2"}}},
		Probes: probeplan.NewTable(probeplan.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	for _, tc := range []struct {
		name string
		want bool
	}{{"node-2", true}, {"node-9", false}} {
		if got := r.IsPeer(tc.name); got != tc.want {
			t.Errorf("IsPeer(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// decodePlan returns plan as the agent decodes it: plans carry their
// upserts pre-encoded (probeplan), which only the wire shows.
func decodePlan(t *testing.T, plan *agentv1.ProbePlan) *agentv1.ProbePlan {
	t.Helper()
	b, err := proto.Marshal(plan)
	if err != nil {
		t.Error(err)
		return plan
	}
	out := &agentv1.ProbePlan{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Error(err)
		return plan
	}
	return out
}

// TestSeedProbesAfterRestart: a restarted coordinator puts the stored
// nodes that ran probe plans back in the peer table before any agent
// registers again (so the first agents to register keep probing the
// others), checked as registrations are, with the server ports they
// registered; departed nodes, nodes without a probe port and stored
// entries that do not validate stay out.
func TestSeedProbesAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	long := timestamppb.New(time.Now().Add(-3 * time.Hour))
	recent := timestamppb.New(time.Now().Add(-time.Minute))
	addr := func(ip string) []*measurev1.NetworkAddress {
		return []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip, MtuBytes: 1500}}
	}
	stored := []*storev1.Agent{
		{NodeName: "connected-at-crash", Connected: true, LastSeenTime: long, Addresses: addr("10.0.0.1"), ProbePort: 7947, HttpPort: 7948},
		{NodeName: "seen-recently", LastSeenTime: recent, Addresses: addr("10.0.0.2"), ProbePort: 7947},
		{NodeName: "cordoned", Connected: true, Maintenance: true, LastSeenTime: long, Addresses: addr("10.0.0.3"), ProbePort: 7947},
		{NodeName: "departed", LastSeenTime: long, Addresses: addr("10.0.0.4"), ProbePort: 7947},
		{NodeName: "no-probe-port", Connected: true, LastSeenTime: recent, Addresses: addr("10.0.0.5")},
		{NodeName: "bad-address", Connected: true, LastSeenTime: recent, Addresses: addr("0.0.0.0"), ProbePort: 7947},
		{NodeName: "bad-port", Connected: true, LastSeenTime: recent, Addresses: addr("10.0.0.7"), ProbePort: 70000},
		// Its HTTP target on iperf3's default port is valid beside the
		// iperf3 port it registered, not beside the default.
		{NodeName: "off-default-ports", Connected: true, LastSeenTime: recent, Addresses: addr("10.0.0.8"), ProbePort: 7947, HttpPort: 5201,
			Iperf3Port: 6201, QperfPort: 19765, QperfDataPort: 19766},
		{NodeName: "port-clash", Connected: true, LastSeenTime: recent, Addresses: addr("10.0.0.9"), ProbePort: 7947, HttpPort: 6201,
			Iperf3Port: 6201, QperfPort: 19765, QperfDataPort: 19766},
	}
	table := probeplan.NewTable(probeplan.Options{})
	r, err := New(ctx, Config{Recorder: knownRecorder{stored}, Probes: table})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	plan, _ := table.Delta("observer", 0)
	got := map[string]*agentv1.ProbePeer{}
	for _, p := range plan.GetUpsert() {
		got[p.GetNodeName()] = p
	}
	for _, tt := range []struct {
		node        string
		in          bool
		maintenance bool
		httpPort    uint32
	}{
		{"connected-at-crash", true, false, 7948},
		{"seen-recently", true, false, 0},
		{"cordoned", true, true, 0},
		{"departed", false, false, 0},
		{"no-probe-port", false, false, 0},
		{"bad-address", false, false, 0},
		{"bad-port", false, false, 0},
		{"off-default-ports", true, false, 5201},
		{"port-clash", false, false, 0},
	} {
		p, in := got[tt.node]
		if in != tt.in {
			t.Errorf("%s in the plan: %v, want %v", tt.node, in, tt.in)
			continue
		}
		if in && (p.GetMaintenance() != tt.maintenance || p.GetHttpPort() != tt.httpPort || p.GetProbePort() != 7947 || p.GetHostMtuBytes() != 1500) {
			t.Errorf("%s: peer %v, want maintenance %v, http_port %d, probe_port 7947, host MTU 1500", tt.node, p, tt.maintenance, tt.httpPort)
		}
	}
	// The sync that follows keeps them: they were connected at the crash,
	// or seen within DepartAfter.
	r.SyncProbes()
	if n := table.Len(); n != 4 {
		t.Errorf("after SyncProbes the table holds %d peers, want 4", n)
	}
}
