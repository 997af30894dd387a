package server_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/server"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// coordinator is a real registry, run manager and store behind a real gRPC
// server on a loopback TCP port.
type coordinator struct {
	reg   *registry.Registry
	agent agentv1.AgentServiceClient
	mesh  meshv1.MeshServiceClient
}

const heartbeat = 50 * time.Millisecond

func start(t *testing.T) *coordinator {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the registry's Config changed by edit, if set.
func startWith(t *testing.T, edit func(*registry.Config)) *coordinator {
	t.Helper()
	c, _ := startAt(t, filepath.Join(t.TempDir(), "db"), edit)
	return c
}

// startAt is startWith on the bbolt file at path; stop stops it (as does
// the test's end) and closes the file, which a second startAt on path
// opens again: a restart.
func startAt(t *testing.T, path string, edit func(*registry.Config)) (c *coordinator, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	st, err := store.Open(store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rc := registry.Config{Recorder: st, HeartbeatInterval: heartbeat}
	if edit != nil {
		edit(&rc)
	}
	reg, err := registry.New(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := runs.New(ctx, runs.Config{Store: st, Agents: reg, IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) },
		ExternalTargets: reg.ExternalTargets()})
	if err != nil {
		t.Fatal(err)
	}
	g, conn := serveLoopback(t, server.New(server.Config{Registry: reg, Runs: mgr, Store: st}))
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = conn.Close()
			mgr.Close()
			reg.Shutdown()
			g.Stop()
			_ = st.Close()
		})
	}
	t.Cleanup(stop)
	return &coordinator{reg: reg, agent: agentv1.NewAgentServiceClient(conn), mesh: meshv1.NewMeshServiceClient(conn)}, stop
}

// serveLoopback serves srv's services on a loopback TCP port and dials
// it; the caller closes the connection and stops the server.
func serveLoopback(t *testing.T, srv *server.Server) (*grpc.Server, *grpc.ClientConn) {
	t.Helper()
	target, g := testutil.ServeGRPC(t, "tcp", srv.Register)
	return g, testutil.DialGRPC(t, target)
}

func register(node string) *agentv1.Register {
	return &agentv1.Register{
		NodeName: node, ProtocolVersion: protocol.Version, AgentVersion: "test",
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.0.1"},
			{Network: measurev1.Network_NETWORK_POD, Ip: "127.0.0.2"},
		},
	}
}

// fakeAgent opens a stream and registers; it is the test's stand-in for an
// agent process (the real one is exercised end to end in deploy/lab).
func fakeAgent(t *testing.T, ctx context.Context, c *coordinator, reg *agentv1.Register) (agentv1.AgentService_ConnectClient, error) {
	t.Helper()
	stream, err := c.agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}}); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if m.GetRegistered() == nil {
		t.Fatalf("first answer is %T, want Registered", m.GetMsg())
	}
	return stream, nil
}

func TestRegistrationRefused(t *testing.T) {
	c := start(t)
	tests := []struct {
		name     string
		reg      func(r *agentv1.Register)
		wantCode codes.Code
		wantMsg  string
	}{
		{"protocol version", func(r *agentv1.Register) { r.ProtocolVersion = 99 }, codes.FailedPrecondition, "speaks protocol 99"},
		{"node name", func(r *agentv1.Register) { r.NodeName = "Node_1" }, codes.InvalidArgument, `"Node_1"`},
		{"address", func(r *agentv1.Register) { r.Addresses[0].Ip = "10.0.0.300" }, codes.InvalidArgument, `addresses[0].ip: "10.0.0.300" is not an IP address`},
		{"unspecified address", func(r *agentv1.Register) { r.Addresses[0].Ip = "0.0.0.0" }, codes.InvalidArgument, `"0.0.0.0" is the unspecified address`},
		{"multicast address", func(r *agentv1.Register) { r.Addresses[1].Ip = "224.0.0.1" }, codes.InvalidArgument, `"224.0.0.1" is a multicast address`},
		{"broadcast address", func(r *agentv1.Register) { r.Addresses[0].Ip = "255.255.255.255" }, codes.InvalidArgument, "broadcast"},
		{"mapped address", func(r *agentv1.Register) { r.Addresses[0].Ip = "::ffff:127.0.0.1" }, codes.InvalidArgument, "use 127.0.0.1"},
		{"zoned address", func(r *agentv1.Register) { r.Addresses[0].Ip = "fe80::1%eth0" }, codes.InvalidArgument, "has a zone"},
		{"two host addresses", func(r *agentv1.Register) { r.Addresses[1].Network = measurev1.Network_NETWORK_HOST }, codes.InvalidArgument, "a second address for network NETWORK_HOST"},
		{"control characters", func(r *agentv1.Register) { r.AgentVersion = "v1\x1b[2J" }, codes.InvalidArgument, "agent_version"},
		{"huge tool list", func(r *agentv1.Register) {
			for i := 0; i < 17; i++ {
				r.Tools = append(r.Tools, &measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_PING, Version: "x"})
			}
		}, codes.InvalidArgument, "17 tools, at most 16"},
		{"long tool version", func(r *agentv1.Register) {
			r.Tools = []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_PING, Version: strings.Repeat("v", 300)}}
		}, codes.InvalidArgument, "tools[0].version is 300 bytes long"},
		{"network", func(r *agentv1.Register) { r.Addresses[1].Network = 0 }, codes.InvalidArgument, "addresses[1].network"},
		{"no host address", func(r *agentv1.Register) { r.Addresses = r.Addresses[1:] }, codes.InvalidArgument, "no host address"},
		{"service ip", func(r *agentv1.Register) { r.ServiceIp = "x" }, codes.InvalidArgument, `service_ip: "x" is not an IP address`},
		{"gossip port", func(r *agentv1.Register) { r.GossipPort = 70000 }, codes.InvalidArgument, "gossip_port 70000 is not a port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := register("node-1")
			tt.reg(reg)
			_, err := fakeAgent(t, testnet.Ctx(t, 10*time.Second), c, reg)
			if status.Code(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %v, want code %v with %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
	if n := len(c.reg.Ready()); n != 0 {
		t.Errorf("%d nodes ready after refused registrations", n)
	}
}

func TestFirstMessageMustRegister(t *testing.T) {
	c := start(t)
	stream, err := c.agent.Connect(testnet.Ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("err = %v, want InvalidArgument", err)
	}
}

func TestDispatchRoundTrip(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	stream, err := fakeAgent(t, ctx, c, register("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	gotEndpoints := make(chan *agentv1.Endpoints, 8)
	go func() { // the fake agent: answers every Work with a ServerStarted
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if ep := m.GetEndpoints(); ep != nil {
				gotEndpoints <- ep
			}
			if w := m.GetWork(); w != nil {
				_ = stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
					WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK,
					Outcome: &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{Port: 5201}},
				}}})
			}
		}
	}()
	w := &agentv1.Work{WorkId: "t00001", Timeout: durationpb.New(time.Second),
		Action: &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{Tool: measurev1.Tool_TOOL_IPERF3, Network: measurev1.Network_NETWORK_HOST}}}
	wr, err := c.reg.Dispatch(ctx, "node-1", w)
	if err != nil {
		t.Fatal(err)
	}
	if wr.GetWorkId() != "t00001" || wr.GetServerStarted().GetPort() != 5201 {
		t.Errorf("answer = %v, want test t00001 with port 5201", wr)
	}
	select {
	case ep := <-gotEndpoints:
		if len(ep.GetNodes()) != 1 || ep.GetNodes()[0].GetNodeName() != "node-1" {
			t.Errorf("endpoints = %v, want node-1", ep)
		}
	case <-ctx.Done():
		t.Fatal("no Endpoints message")
	}
	if _, err := c.reg.Dispatch(ctx, "node-2", w); !errors.Is(err, registry.ErrAgentUnavailable) {
		t.Errorf("dispatch to an unknown node: err = %v, want ErrAgentUnavailable", err)
	}
	_ = stream.CloseSend()
}

func TestAgentLostWhileWorking(t *testing.T) {
	tests := []struct {
		name string
		lose func(cancel context.CancelFunc)
	}{
		{"stream closed", func(cancel context.CancelFunc) { cancel() }},
		{"heartbeats stop", func(context.CancelFunc) {}}, // the fake agent never sends one
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := start(t)
			ctx := testnet.Ctx(t, 10*time.Second)
			agentCtx, cancelAgent := context.WithCancel(ctx)
			defer cancelAgent()
			stream, err := fakeAgent(t, agentCtx, c, register("node-1"))
			if err != nil {
				t.Fatal(err)
			}
			go func() { // drain, never answer
				for {
					if _, err := stream.Recv(); err != nil {
						return
					}
				}
			}()
			errc := make(chan error, 1)
			go func() {
				_, err := c.reg.Dispatch(ctx, "node-1", &agentv1.Work{WorkId: "t1", Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}})
				errc <- err
			}()
			tt.lose(cancelAgent)
			if err := <-errc; !errors.Is(err, registry.ErrAgentUnavailable) {
				t.Errorf("dispatch err = %v, want ErrAgentUnavailable", err)
			}
			agents := c.reg.Agents()
			if len(agents) != 1 || agents[0].GetConnected() {
				t.Errorf("agents = %v, want node-1 known and disconnected", agents)
			}
		})
	}
}

func TestNewerSessionReplacesOlder(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	old, err := fakeAgent(t, ctx, c, register("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fakeAgent(t, ctx, c, register("node-1")); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := old.Recv()
		if err == nil {
			continue // heartbeats, endpoints
		}
		if status.Code(err) != codes.Aborted {
			t.Errorf("old session ended with %v, want Aborted", err)
		}
		break
	}
	if n := len(c.reg.Ready()); n != 1 {
		t.Errorf("%d ready nodes, want 1", n)
	}
}

func TestUserAPIErrors(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"trigger with no agents", func() error {
			_, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{})
			return err
		}, codes.FailedPrecondition},
		{"trigger with a bad test", func() error {
			_, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: 99}}}})
			return err
		}, codes.InvalidArgument},
		{"get unknown run", func() error {
			_, err := c.mesh.GetRun(ctx, &meshv1.GetRunRequest{RunId: "nope"})
			return err
		}, codes.NotFound},
		{"get without id", func() error {
			_, err := c.mesh.GetRun(ctx, &meshv1.GetRunRequest{})
			return err
		}, codes.InvalidArgument},
		{"results with a bad token", func() error {
			_, err := c.mesh.ListResults(ctx, &meshv1.ListResultsRequest{PageToken: "%%"})
			return err
		}, codes.InvalidArgument},
		{"watch unknown run", func() error {
			s, err := c.mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: "nope"})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); status.Code(err) != tt.want {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// A node cannot register an address that another connected node holds: it
// would steer that node's tests (and receive them) in its place. The
// address is node-1's while its session lasts (also across its own
// reconnect), and free once node-1 is gone.
func TestAddressConflictRefused(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	sctx, endNode1 := context.WithCancel(ctx)
	if _, err := fakeAgent(t, sctx, c, register("node-1")); err != nil {
		t.Fatal(err)
	}
	evil := register("evil")
	evil.Addresses = evil.Addresses[:1] // 127.0.0.1: node-1's host IP
	for _, tt := range []struct {
		name    string
		prepare func()
		reg     *agentv1.Register
		refused bool
	}{
		{"another node with node-1's host IP", func() {}, evil, true},
		{"node-1 reconnecting", func() {}, register("node-1"), false},
		{"another node once node-1 is gone", func() {
			endNode1()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, ok := c.reg.Node("node-1"); !ok {
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("node-1 still connected")
				}
			}
		}, evil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.prepare()
			rctx := sctx
			if tt.reg == evil {
				rctx = ctx
			}
			_, err := fakeAgent(t, rctx, c, tt.reg)
			refused := status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), `connected node "node-1"`)
			if refused != tt.refused || (!tt.refused && err != nil) {
				t.Errorf("err = %v, want refused=%v", err, tt.refused)
			}
		})
	}
}

// An agent that answers twice (or answers work nobody waits for) must not
// stall its session: the next work still gets through.
func TestDuplicateAnswersDoNotStallTheSession(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	stream, err := fakeAgent(t, ctx, c, register("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	answering := make(chan struct{})
	go func() { // answers every Work three times, and sends a stray answer
		defer close(answering)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			w := m.GetWork()
			if w == nil {
				continue
			}
			for _, id := range []string{w.GetWorkId(), w.GetWorkId(), w.GetWorkId(), "never-sent"} {
				_ = stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
					WorkId: id, Status: measurev1.Status_STATUS_OK,
					Outcome: &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}},
				}}})
			}
		}
	}()
	// Each dispatch has its own test ID and must get its own answer: a
	// duplicate of an earlier answer arriving while a later dispatch
	// waits must not pass for that dispatch's answer.
	for _, id := range []string{"t1", "t2", "t3"} {
		w := &agentv1.Work{WorkId: id, Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}}
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		wr, err := c.reg.Dispatch(callCtx, "node-1", w)
		cancel()
		if err != nil {
			t.Fatalf("dispatch %s: %v", id, err)
		}
		if wr.GetWorkId() != id {
			t.Errorf("dispatch %s got the answer to %s", id, wr.GetWorkId())
		}
	}
	// Only the answering goroutine sends: end the session from the
	// coordinator's side (which ends its Recv), then close.
	c.reg.Shutdown()
	<-answering
	_ = stream.CloseSend()
}

func TestNodeStates(t *testing.T) {
	c := start(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	stateOf := func(node string) meshv1.NodeState {
		t.Helper()
		resp, err := c.mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetAgents() {
			if a.GetNodeName() == node {
				return a.GetState()
			}
		}
		return meshv1.NodeState_NODE_STATE_UNSPECIFIED
	}
	hostOnly := register("node-2")
	hostOnly.Addresses = hostOnly.Addresses[:1]
	hostOnly.Addresses[0].Ip = "127.0.0.3"
	agentCtx, leave := context.WithCancel(ctx)
	if _, err := fakeAgent(t, agentCtx, c, register("node-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := fakeAgent(t, ctx, c, hostOnly); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		node string
		want meshv1.NodeState
	}{
		{"registered with every address", func() error { return nil }, "node-1", meshv1.NodeState_NODE_STATE_READY},
		{"registered without a pod endpoint", func() error { return nil }, "node-2", meshv1.NodeState_NODE_STATE_PENDING},
		{"cordoned", func() error {
			_, err := c.mesh.SetMaintenance(ctx, &meshv1.SetMaintenanceRequest{NodeName: "node-1", Maintenance: true})
			return err
		}, "node-1", meshv1.NodeState_NODE_STATE_MAINTENANCE},
		{"cordoned and gone stays cordoned", func() error {
			leave()
			// Wait until node-1's session is gone (only node-2 is left
			// ready), or the state read next would be of a node still
			// connected and prove nothing.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, connected := c.reg.Node("node-1"); !connected {
					return nil
				}
				if time.Now().After(deadline) {
					return errors.New("node-1 still connected 5 s after its session ended")
				}
			}
		}, "node-1", meshv1.NodeState_NODE_STATE_MAINTENANCE},
		{"uncordoned while gone", func() error {
			_, err := c.mesh.SetMaintenance(ctx, &meshv1.SetMaintenanceRequest{NodeName: "node-1", Maintenance: false})
			return err
		}, "node-1", meshv1.NodeState_NODE_STATE_UNAVAILABLE},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := stateOf(s.node); got != s.want {
			t.Errorf("%s: %s is %v, want %v", s.name, s.node, got, s.want)
		}
	}
	if _, err := c.mesh.SetMaintenance(ctx, &meshv1.SetMaintenanceRequest{NodeName: "node-9", Maintenance: true}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown node: err = %v, want NotFound", err)
	}
	// A reconnect keeps a cordon.
	if _, err := c.mesh.SetMaintenance(ctx, &meshv1.SetMaintenanceRequest{NodeName: "node-1", Maintenance: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := fakeAgent(t, ctx, c, register("node-1")); err != nil {
		t.Fatal(err)
	}
	if got := stateOf("node-1"); got != meshv1.NodeState_NODE_STATE_MAINTENANCE {
		t.Errorf("after a reconnect node-1 is %v, want MAINTENANCE", got)
	}
}
