package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// The tests of a session's life on a registry: registration and its
// refusals, address conflicts between nodes, a session replaced by the
// node's next one, the gossip reporters, the Endpoints the agents get,
// work dispatched to an agent, and maintenance. The harness is in
// conn_test.go.

// TestRegistration: a Register the coordinator takes is answered with
// Registered and makes the node ready; one it refuses ends Serve with an
// error that says why, and the node is not ready.
func TestRegistration(t *testing.T) {
	heartbeat := &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}}
	oldVersion := agentReg("node-1", "10.0.0.1", "")
	oldVersion.ProtocolVersion = protocol.Version + 1
	noHost := agentReg("node-1", "10.0.0.1", "")
	noHost.Addresses[0].Network = measurev1.Network_NETWORK_POD
	badName := agentReg("Node_1!", "10.0.0.1", "")
	tests := []struct {
		name     string
		first    *agentv1.ConnectRequest
		wantErr  error  // nil: registered
		wantText string // in the error
		wantPod  bool   // the ready node has a pod address
	}{
		{"host only", registerMsg(agentReg("node-1", "10.0.0.1", "")), nil, "", false},
		{"host and pod", registerMsg(agentReg("node-1", "10.0.0.1", "10.1.0.1")), nil, "", true},
		{"heartbeat first", heartbeat, ErrBadRegistration, "must be a Register", false},
		{"other protocol version", registerMsg(oldVersion), ErrVersionMismatch, "speaks protocol", false},
		{"no host address", registerMsg(noHost), ErrBadRegistration, "no host address", false},
		{"bad node name", registerMsg(badName), ErrBadRegistration, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Config{})
			a := dial(t, r, tt.first)
			if tt.wantErr != nil {
				err := a.wait(t)
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("Serve = %v, want %v with %q", err, tt.wantErr, tt.wantText)
				}
				if got := r.Ready(); len(got) != 0 {
					t.Errorf("Ready() = %v after a refused registration", got)
				}
				return
			}
			reg := a.next(t, "Registered", func(m *agentv1.ConnectResponse) bool { return m.GetRegistered() != nil }).GetRegistered()
			if got := reg.GetHeartbeatInterval().AsDuration(); got != time.Second {
				t.Errorf("Registered.heartbeat_interval = %v, want 1s", got)
			}
			n, ok := r.Node("node-1")
			if !ok || n.HostIP != netip.MustParseAddr("10.0.0.1") || n.PodIP.IsValid() != tt.wantPod {
				t.Fatalf("Node(node-1) = %+v, %v; want host 10.0.0.1, pod address %v", n, ok, tt.wantPod)
			}
			wantState := meshv1.NodeState_NODE_STATE_PENDING // no pod endpoint yet
			if tt.wantPod {
				wantState = meshv1.NodeState_NODE_STATE_READY
			}
			if ag := r.Agents(); len(ag) != 1 || !ag[0].GetConnected() || ag[0].GetState() != wantState {
				t.Errorf("Agents() = %v, want node-1 connected and %v", ag, wantState)
			}
		})
	}
}

// TestAddressConflicts: with node-1 connected (host 10.0.0.1, pod
// 10.1.0.1), a registration of another node that announces one of
// node-1's addresses, or a service IP that is one of them, is refused; the
// same node registering again, or another node with its own addresses, is
// taken.
func TestAddressConflicts(t *testing.T) {
	withService := func(reg *agentv1.Register, ip string) *agentv1.Register { reg.ServiceIp = ip; return reg }
	tests := []struct {
		name     string
		reg      *agentv1.Register
		wantText string // "": taken
	}{
		{"own addresses", agentReg("node-2", "10.0.0.2", "10.1.0.2"), ""},
		{"node-1 again", agentReg("node-1", "10.0.0.1", "10.1.0.1"), ""},
		{"node-1's host address", agentReg("node-2", "10.0.0.1", ""), `connected node "node-1" registered`},
		{"node-1's pod address as host", agentReg("node-2", "10.1.0.1", ""), `connected node "node-1" registered`},
		{"node-1's host address as pod", agentReg("node-2", "10.0.0.2", "10.0.0.1"), `connected node "node-1" registered`},
		{"service IP of node-1's host", withService(agentReg("node-2", "10.0.0.2", "10.1.0.2"), "10.0.0.1"), `is the host IP of connected node "node-1"`},
		{"service IP of node-1's pod", withService(agentReg("node-2", "10.0.0.2", "10.1.0.2"), "10.1.0.1"), `is the pod IP of connected node "node-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Config{})
			connect(t, r, agentReg("node-1", "10.0.0.1", "10.1.0.1"))
			a := dial(t, r, registerMsg(tt.reg))
			if tt.wantText != "" {
				if err := a.wait(t); !errors.Is(err, ErrBadRegistration) || !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("Serve = %v, want ErrBadRegistration with %q", err, tt.wantText)
				}
				if _, ok := r.Node(tt.reg.GetNodeName()); ok && tt.reg.GetNodeName() != "node-1" {
					t.Errorf("refused %s is a connected node", tt.reg.GetNodeName())
				}
				return
			}
			a.next(t, "Registered", func(m *agentv1.ConnectResponse) bool { return m.GetRegistered() != nil })
			if _, ok := r.Node(tt.reg.GetNodeName()); !ok {
				t.Errorf("%s is not connected after it registered", tt.reg.GetNodeName())
			}
		})
	}
}

// TestAddressConflictAtAttach: two registrations of one address that both
// passed the check before either attached (registering at once) do not
// both attach: the second is refused where it attaches, under the lock.
func TestAddressConflictAtAttach(t *testing.T) {
	r := newRegistry(t, Config{})
	var sessions []*session
	for _, name := range []string{"node-1", "node-2"} {
		reg := agentReg(name, "10.0.0.1", "")
		n, err := validateRegister(reg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.checkConflicts(n); err != nil {
			t.Fatalf("%s before any attach: %v", name, err)
		}
		sessions = append(sessions, newSession(n))
	}
	ctx := context.Background()
	if err := r.attach(ctx, sessions[0], agentReg("node-1", "10.0.0.1", "")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.detach(ctx, sessions[0]) })
	err := r.attach(ctx, sessions[1], agentReg("node-2", "10.0.0.1", ""))
	if !errors.Is(err, ErrBadRegistration) || !strings.Contains(err.Error(), `connected node "node-1" registered`) {
		t.Fatalf("second attach: %v, want ErrBadRegistration naming node-1", err)
	}
	if _, ok := r.Node("node-2"); ok {
		t.Error("node-2 is connected with node-1's address")
	}
}

// TestSessionReplaced: a node's second session replaces its first, which
// ends with ErrReplaced; the node stays connected (the old session's end
// does not take the new one away) with the new session's addresses, and
// an address the node gave up is free for another node.
func TestSessionReplaced(t *testing.T) {
	tests := []struct {
		name          string
		oldIP, newIP  string
		wantOldIPFree bool
	}{
		{"same address", "10.0.0.1", "10.0.0.1", false},
		{"new address", "10.0.0.1", "10.0.0.9", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Config{})
			first, _ := connect(t, r, agentReg("node-1", tt.oldIP, ""))
			second, _ := connect(t, r, agentReg("node-1", tt.newIP, ""))
			if err := first.wait(t); !errors.Is(err, ErrReplaced) {
				t.Fatalf("first session's Serve = %v, want ErrReplaced", err)
			}
			if n, ok := r.Node("node-1"); !ok || n.HostIP != netip.MustParseAddr(tt.newIP) {
				t.Fatalf("Node(node-1) = %+v, %v after the replacement; want host %s", n, ok, tt.newIP)
			}
			if got := len(r.Ready()); got != 1 {
				t.Errorf("%d ready nodes, want 1", got)
			}
			// Work reaches the second session.
			done := make(chan error, 1)
			go func() {
				_, err := r.Dispatch(context.Background(), "node-1", clientWork("run/t1"))
				done <- err
			}()
			w := second.next(t, "work", func(m *agentv1.ConnectResponse) bool { return m.GetWork() != nil }).GetWork()
			second.send(clientDone(w.GetWorkId()))
			if err := <-done; err != nil {
				t.Errorf("Dispatch to the second session = %v", err)
			}
			other := dial(t, r, registerMsg(agentReg("node-2", tt.oldIP, "")))
			if tt.wantOldIPFree {
				other.next(t, "Registered", func(m *agentv1.ConnectResponse) bool { return m.GetRegistered() != nil })
			} else if err := other.wait(t); !errors.Is(err, ErrBadRegistration) {
				t.Errorf("node-2 on node-1's address: Serve = %v, want ErrBadRegistration", err)
			}
		})
	}
}

// clientWork is a run_client Work with test ID id.
func clientWork(id string) *agentv1.Work {
	return &agentv1.Work{WorkId: id, Action: &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{}}}
}

// clientDone is an agent's OK answer to clientWork(id).
func clientDone(id string) *agentv1.ConnectRequest {
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
		WorkId: id, Status: measurev1.Status_STATUS_OK, Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{}}}}}
}

// TestGossipReporters: registering agents that gossip get the others'
// gossip addresses as seeds; the first Config.GossipReporters of them
// report their views, the others are told to be quiet, and a quiet one is
// made a reporter when a reporter leaves.
func TestGossipReporters(t *testing.T) {
	tests := []struct {
		name      string
		reporters int
		wantQuiet []bool // per agent, in registration order
	}{
		{"two reporters", 2, []bool{false, false, true}},
		{"every agent reports", -1, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Config{GossipReporters: tt.reporters})
			var agents []*fakeAgent
			var seeds []string
			for i, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
				reg := agentReg("node-"+ip[len(ip)-1:], ip, "")
				reg.GossipPort = 7946
				a, got := connect(t, r, reg)
				agents = append(agents, a)
				if got.GetGossipQuiet() != tt.wantQuiet[i] {
					t.Errorf("%s: gossip_quiet = %v, want %v", reg.GetNodeName(), got.GetGossipQuiet(), tt.wantQuiet[i])
				}
				if !slices.Equal(got.GetGossipSeeds(), seeds) {
					t.Errorf("%s: gossip seeds %v, want %v", reg.GetNodeName(), got.GetGossipSeeds(), seeds)
				}
				seeds = append(seeds, ip+":7946")
			}
			if !tt.wantQuiet[2] {
				return
			}
			agents[0].leave(t)
			m := agents[2].next(t, "GossipReporting", func(m *agentv1.ConnectResponse) bool { return m.GetGossipReporting() != nil })
			if !m.GetGossipReporting().GetReport() {
				t.Errorf("the quiet agent got %v after a reporter left, want report true", m.GetGossipReporting())
			}
		})
	}
}

// TestEndpointAnnouncements: an agent without probe plans gets the
// Endpoints of every connected node at once, and again when a node
// connects or leaves.
func TestEndpointAnnouncements(t *testing.T) {
	names := func(m *agentv1.ConnectResponse) []string {
		var out []string
		for _, n := range m.GetEndpoints().GetNodes() {
			out = append(out, n.GetNodeName())
		}
		return out
	}
	r := newRegistry(t, Config{})
	watcher, _ := connect(t, r, agentReg("node-1", "10.0.0.1", "10.1.0.1"))
	others := map[string]*fakeAgent{}
	for _, step := range []struct {
		name      string
		act       func(t *testing.T)
		wantNodes []string
	}{
		{"alone", func(*testing.T) {}, []string{"node-1"}},
		{"node-2 connects", func(t *testing.T) { others["node-2"], _ = connect(t, r, agentReg("node-2", "10.0.0.2", "10.1.0.2")) },
			[]string{"node-1", "node-2"}},
		{"node-3 connects", func(t *testing.T) { others["node-3"], _ = connect(t, r, agentReg("node-3", "10.0.0.3", "")) },
			[]string{"node-1", "node-2", "node-3"}},
		{"node-2 leaves", func(t *testing.T) { others["node-2"].leave(t) }, []string{"node-1", "node-3"}},
	} {
		step.act(t)
		// An Endpoints sent before the change may still be on its way:
		// the one that lists the change comes next.
		m := watcher.next(t, step.name+": Endpoints", func(m *agentv1.ConnectResponse) bool {
			return m.GetEndpoints() != nil && slices.Equal(names(m), step.wantNodes)
		})
		for _, n := range m.GetEndpoints().GetNodes() {
			if n.GetNodeName() == "node-2" && (len(n.GetAddresses()) != 2 || n.GetIperf3Port() != uint32(protocol.DefaultIperf3Port)) {
				t.Errorf("%s: node-2's endpoint %v, want its two addresses and the default iperf3 port", step.name, n)
			}
		}
	}
}

// TestDispatch: Dispatch hands work to the node's agent and returns its
// answer with the same test ID and kind; it fails for a node without a
// session, for work without an action, when the session ends first and
// when the caller's context does.
func TestDispatch(t *testing.T) {
	serverStarted := func(id string) *agentv1.ConnectRequest {
		return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
			WorkId: id, Status: measurev1.Status_STATUS_OK, Outcome: &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{}}}}}
	}
	tests := []struct {
		name    string
		node    string
		work    *agentv1.Work
		agent   func(a *fakeAgent, w *agentv1.Work) // what the agent does with the work
		timeout time.Duration                       // of the caller; 0: none
		wantErr error                               // nil: answered
		wantAny bool                                // any error will do (work refused before it is sent)
	}{
		{"answered", "node-1", clientWork("run/t1"), func(a *fakeAgent, w *agentv1.Work) { a.send(clientDone(w.GetWorkId())) }, 0, nil, false},
		{"answer of another test, then its own", "node-1", clientWork("run/t2"), func(a *fakeAgent, w *agentv1.Work) {
			a.send(clientDone("run/other"))
			a.send(serverStarted(w.GetWorkId())) // same ID, other kind
			a.send(clientDone(w.GetWorkId()))
		}, 0, nil, false},
		{"unknown node", "node-9", clientWork("run/t3"), nil, 0, ErrAgentUnavailable, false},
		{"no action", "node-1", &agentv1.Work{WorkId: "run/t4"}, nil, 0, nil, true},
		{"session ends", "node-1", clientWork("run/t5"), func(a *fakeAgent, _ *agentv1.Work) { a.cancel() }, 0, ErrAgentUnavailable, false},
		{"caller gives up", "node-1", clientWork("run/t6"), func(*fakeAgent, *agentv1.Work) {}, 50 * time.Millisecond, context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Config{})
			a, _ := connect(t, r, agentReg("node-1", "10.0.0.1", ""))
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			type answer struct {
				wr  *agentv1.WorkResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				wr, err := r.Dispatch(ctx, tt.node, tt.work)
				done <- answer{wr, err}
			}()
			if tt.agent != nil {
				w := a.next(t, "work", func(m *agentv1.ConnectResponse) bool { return m.GetWork() != nil }).GetWork()
				if w.GetWorkId() != tt.work.GetWorkId() {
					t.Fatalf("agent got work %q, want %q", w.GetWorkId(), tt.work.GetWorkId())
				}
				tt.agent(a, w)
			}
			got := <-done
			switch {
			case tt.wantAny:
				if got.err == nil {
					t.Errorf("Dispatch = %v, want an error", got.wr)
				}
			case tt.wantErr != nil:
				if !errors.Is(got.err, tt.wantErr) {
					t.Errorf("Dispatch error = %v, want %v", got.err, tt.wantErr)
				}
			case got.err != nil:
				t.Errorf("Dispatch = %v", got.err)
			case got.wr.GetWorkId() != tt.work.GetWorkId() || got.wr.GetClientDone() == nil:
				t.Errorf("Dispatch = %v, want the client_done of %q", got.wr, tt.work.GetWorkId())
			}
		})
	}
}

// TestSessionWarningsLimited: what an agent sends that is refused or that
// nobody waits for (here 50 answers of work never sent and 50 gossip
// views of a node that is not a reporter) is logged once per kind, not
// once a message: a rogue or broken agent cannot flood the coordinator's
// log, and one kind does not hide the other. A dispatch answered after
// them is the sign that all were handled.
func TestSessionWarningsLimited(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	r := newRegistry(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	a, _ := connect(t, r, agentReg("node-1", "10.0.0.1", ""))
	const n = 50
	for i := range n {
		a.send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
			WorkId: fmt.Sprintf("run/never-%d", i), Status: measurev1.Status_STATUS_OK,
			Outcome: &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}}}})
		a.send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_GossipView{GossipView: &agentv1.GossipView{}}})
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Dispatch(context.Background(), "node-1", clientWork("run/t1"))
		done <- err
	}()
	w := a.next(t, "work", func(m *agentv1.ConnectResponse) bool { return m.GetWork() != nil }).GetWork()
	a.send(clientDone(w.GetWorkId()))
	if err := <-done; err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	unclaimed, refused := strings.Count(logs.String(), "work result nobody waits for"), strings.Count(logs.String(), "gossip view refused")
	if unclaimed != 1 || refused != 1 {
		t.Errorf("%d lines of unclaimed results and %d of refused gossip views for %d of each, want one of each:\n%.3000s",
			unclaimed, refused, n, logs.String())
	}
}

// TestMaintenance: a cordoned node is in maintenance, targetable but out
// of default meshes, until it is uncordoned; an unknown node cannot be
// cordoned.
func TestMaintenance(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		on        bool
		wantErr   error
		wantState meshv1.NodeState
		wantMesh  []string
	}{
		{"cordon", "node-1", true, nil, meshv1.NodeState_NODE_STATE_MAINTENANCE, []string{"node-2"}},
		{"uncordon", "node-1", false, nil, meshv1.NodeState_NODE_STATE_READY, []string{"node-1", "node-2"}},
		{"unknown node", "node-9", true, ErrUnknownNode, 0, []string{"node-1", "node-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Config{})
			connect(t, r, agentReg("node-1", "10.0.0.1", "10.1.0.1"))
			connect(t, r, agentReg("node-2", "10.0.0.2", "10.1.0.2"))
			a, err := r.SetMaintenance(context.Background(), tt.node, tt.on)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("SetMaintenance = %v, want %v", err, tt.wantErr)
			}
			if err == nil && a.GetState() != tt.wantState {
				t.Errorf("SetMaintenance state = %v, want %v", a.GetState(), tt.wantState)
			}
			mesh, targetable := r.Known()
			if !slices.Equal(mesh, tt.wantMesh) || !slices.Equal(targetable, []string{"node-1", "node-2"}) {
				t.Errorf("Known() = %v, %v; want mesh %v, both targetable", mesh, targetable, tt.wantMesh)
			}
		})
	}
}

// TestLateQueueBounded: a session's queue of late results takes up to
// maxLateQueue results and maxLateBytes of them, refuses the rest (the
// agent keeps them for its next session), and takes again what
// takeLate made room for.
func TestLateQueueBounded(t *testing.T) {
	result := func(id string, payload int) *agentv1.WorkResult {
		return &agentv1.WorkResult{WorkId: id, Status: measurev1.Status_STATUS_TIMEOUT, Message: strings.Repeat("x", payload)}
	}
	for _, tt := range []struct {
		name    string
		payload int
		want    int
	}{
		{"small results: bounded by count", 0, maxLateQueue},
		{"1 MiB results: bounded by bytes", 1 << 20, maxLateBytes / proto.Size(result("run/t00000", 1<<20))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(Node{Name: "node-1"})
			n := 0
			for ; n <= maxLateQueue; n++ {
				if !s.queueLate(result(fmt.Sprintf("run/t%05d", n), tt.payload)) {
					break
				}
			}
			if n != tt.want {
				t.Errorf("queued %d late results before a refusal, want %d", n, tt.want)
			}
			taken := 0
			for batch := s.takeLate(); len(batch) > 0; batch = s.takeLate() {
				taken += len(batch)
			}
			if taken != n {
				t.Errorf("takeLate gave %d results, want the %d queued", taken, n)
			}
			if s.lateBytes != 0 {
				t.Errorf("%d bytes counted after every late result was taken, want 0", s.lateBytes)
			}
			if !s.queueLate(result("run/again", tt.payload)) {
				t.Error("the emptied queue refused a late result")
			}
		})
	}
}
