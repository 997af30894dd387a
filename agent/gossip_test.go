package agent_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// gossipCoordinator is a fake coordinator that hands out gossip seeds as
// the real one does and keeps every agent's latest registration, its
// gossip view (whole views, and deltas applied to them if deltas is set:
// Registered.gossip_deltas) and every view message it sent. It never
// sends heartbeats: its heartbeat timeout is long.
type gossipCoordinator struct {
	deltas bool
	// quiet names the nodes told Registered.gossip_quiet, and push their
	// channels of messages to send them (both set before any agent runs).
	quiet map[string]bool
	push  map[string]chan *agentv1.ConnectResponse

	mu    sync.Mutex
	regs  map[string]*agentv1.Register
	views map[string]map[string]measurev1.GossipState
	sent  map[string][]*agentv1.GossipView
}

func newGossipCoordinator(deltas bool) *gossipCoordinator {
	return &gossipCoordinator{deltas: deltas, regs: map[string]*agentv1.Register{},
		views: map[string]map[string]measurev1.GossipState{}, sent: map[string][]*agentv1.GossipView{}}
}

func (gc *gossipCoordinator) connect(s grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error {
	m, err := s.Recv()
	if err != nil {
		return err
	}
	reg := m.GetRegister()
	gc.mu.Lock()
	var seeds []string
	for name, r := range gc.regs {
		if name != reg.GetNodeName() && r.GetGossipPort() != 0 {
			seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", r.GetGossipPort()))
		}
	}
	gc.regs[reg.GetNodeName()] = reg
	gc.mu.Unlock()
	if err := s.Send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
		CoordinatorVersion: "fake", HeartbeatInterval: durationpb.New(50 * time.Millisecond), HeartbeatTimeout: durationpb.New(time.Minute),
		GossipSeeds: seeds, GossipDeltas: gc.deltas, GossipQuiet: gc.quiet[reg.GetNodeName()],
	}}}); err != nil {
		return err
	}
	if push := gc.push[reg.GetNodeName()]; push != nil {
		go func() { // owner: this session; ends with its stream
			for {
				select {
				case m := <-push:
					if s.Send(m) != nil {
						return
					}
				case <-s.Context().Done():
					return
				}
			}
		}()
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		if v := m.GetGossipView(); v != nil {
			node := reg.GetNodeName()
			gc.mu.Lock()
			gc.sent[node] = append(gc.sent[node], v)
			states := gc.views[node]
			if !v.GetDelta() || states == nil {
				states = map[string]measurev1.GossipState{}
			}
			for _, mb := range v.GetMembers() {
				if mb.GetState() == measurev1.GossipState_GOSSIP_STATE_FORGOTTEN {
					delete(states, mb.GetNodeName())
				} else {
					states[mb.GetNodeName()] = mb.GetState()
				}
			}
			gc.views[node] = states
			gc.mu.Unlock()
		}
	}
}

func (gc *gossipCoordinator) registration(node string) *agentv1.Register {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.regs[node]
}

func (gc *gossipCoordinator) view(node string) map[string]measurev1.GossipState {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return maps.Clone(gc.views[node])
}

// messages returns the gossip views node sent, in order.
func (gc *gossipCoordinator) messages(node string) []*agentv1.GossipView {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return slices.Clone(gc.sent[node])
}

// runGossipAgent runs an agent until the returned stop is called (or the test
// ends); stop waits for Run to return.
func runGossipAgent(t *testing.T, cfg agent.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testnet.Ctx(t, 2*time.Minute))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := agent.Run(ctx, cfg); err != nil {
			t.Errorf("agent %s: %v", cfg.NodeName, err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestGossipViews runs two agents that gossip on loopback: the second
// joins through the seed the coordinator names, both report each other
// alive, and when one stops the other reports it left. A third agent
// whose gossip port is taken still registers and measures, without
// gossip.
func TestGossipViews(t *testing.T) {
	gc := newGossipCoordinator(true)
	target := startFake(t, gc.connect)
	const alive, left = measurev1.GossipState_GOSSIP_STATE_ALIVE, measurev1.GossipState_GOSSIP_STATE_LEFT

	cfgA := baseConfig(t, target, "node-a")
	cfgA.GossipPort = testnet.FreePort(t)
	runGossipAgent(t, cfgA)
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a registered", func() bool { return gc.registration("node-a") != nil })
	cfgB := baseConfig(t, target, "node-b")
	cfgB.GossipPort = testnet.FreePort(t)
	stopB := runGossipAgent(t, cfgB)

	for node, cfg := range map[string]agent.Config{"node-a": cfgA, "node-b": cfgB} {
		testutil.Eventually(t, time.Minute, 20*time.Millisecond, node+" registered", func() bool { return gc.registration(node) != nil })
		if got := gc.registration(node).GetGossipPort(); got != cfg.GossipPort {
			t.Errorf("%s registered gossip port %d, want %d", node, got, cfg.GossipPort)
		}
		testutil.Eventually(t, time.Minute, 20*time.Millisecond, node+"'s view: both alive", func() bool {
			v := gc.view(node)
			return len(v) == 2 && v["node-a"] == alive && v["node-b"] == alive
		})
	}

	stopB()
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a's view: node-b left", func() bool {
		v := gc.view("node-a")
		return v["node-a"] == alive && v["node-b"] == left
	})

	// node-c's gossip port is taken: it registers without gossip.
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	cfgC := baseConfig(t, target, "node-c")
	cfgC.GossipPort = uint32(taken.LocalAddr().(*net.UDPAddr).Port)
	runGossipAgent(t, cfgC)
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-c registered", func() bool { return gc.registration("node-c") != nil })
	if got := gc.registration("node-c").GetGossipPort(); got != 0 {
		t.Errorf("node-c, whose gossip cannot bind, registered gossip port %d; want 0", got)
	}
	if v := gc.view("node-c"); v != nil {
		t.Errorf("node-c sent a gossip view without gossip: %v", v)
	}
}

// TestGossipViewsWholeThenDeltas: a session's first gossip view is whole;
// after it, a coordinator that takes deltas gets only deltas, each with
// just the members that changed (never the agent itself, which never
// changes), and one that does not gets whole views only.
func TestGossipViewsWholeThenDeltas(t *testing.T) {
	for _, tt := range []struct {
		name   string
		deltas bool
	}{
		{"coordinator takes deltas", true},
		{"coordinator predates deltas", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const alive, left = measurev1.GossipState_GOSSIP_STATE_ALIVE, measurev1.GossipState_GOSSIP_STATE_LEFT
			gc := newGossipCoordinator(tt.deltas)
			target := startFake(t, gc.connect)
			cfgA := baseConfig(t, target, "node-a")
			cfgA.GossipPort = testnet.FreePort(t)
			runGossipAgent(t, cfgA)
			testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a's first view", func() bool { return len(gc.messages("node-a")) > 0 })
			cfgB := baseConfig(t, target, "node-b")
			cfgB.GossipPort = testnet.FreePort(t)
			stopB := runGossipAgent(t, cfgB)
			testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a sees node-b alive", func() bool { return gc.view("node-a")["node-b"] == alive })
			stopB()
			testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a sees node-b left", func() bool { return gc.view("node-a")["node-b"] == left })

			msgs := gc.messages("node-a")
			if msgs[0].GetDelta() || len(msgs[0].GetMembers()) == 0 {
				t.Fatalf("first view: delta %v with %d members; want a whole view", msgs[0].GetDelta(), len(msgs[0].GetMembers()))
			}
			for i, v := range msgs[1:] {
				if v.GetDelta() != tt.deltas {
					t.Errorf("view %d: delta = %v, want %v", i+1, v.GetDelta(), tt.deltas)
				}
				if !v.GetDelta() {
					continue
				}
				for _, m := range v.GetMembers() {
					if m.GetNodeName() != "node-b" {
						t.Errorf("delta %d lists %s (%v), which never changed", i+1, m.GetNodeName(), m.GetState())
					}
				}
			}
			if len(msgs) < 2 {
				t.Errorf("node-a sent %d views; want the whole one and later ones", len(msgs))
			}
		})
	}
}

// TestGossipQuietUntilReporting: an agent told to be quiet
// (Registered.gossip_quiet) gossips but sends no view until
// GossipReporting turns its views on; then a whole view of the pool as it
// is. Were it not quiet, its first view would be the one of its session's
// start, which lists only itself.
func TestGossipQuietUntilReporting(t *testing.T) {
	const alive = measurev1.GossipState_GOSSIP_STATE_ALIVE
	gc := newGossipCoordinator(true)
	gc.quiet = map[string]bool{"node-a": true}
	gc.push = map[string]chan *agentv1.ConnectResponse{"node-a": make(chan *agentv1.ConnectResponse, 1)}
	target := startFake(t, gc.connect)
	cfgA := baseConfig(t, target, "node-a")
	cfgA.GossipPort = testnet.FreePort(t)
	runGossipAgent(t, cfgA)
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a registered", func() bool { return gc.registration("node-a") != nil })
	cfgB := baseConfig(t, target, "node-b")
	cfgB.GossipPort = testnet.FreePort(t)
	runGossipAgent(t, cfgB)
	// node-b (not quiet) joined through node-a: both know each other.
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-b sees node-a alive", func() bool { return gc.view("node-b")["node-a"] == alive })
	gc.push["node-a"] <- &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_GossipReporting{
		GossipReporting: &agentv1.GossipReporting{Report: true}}}
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a's first view", func() bool { return len(gc.messages("node-a")) > 0 })
	first := gc.messages("node-a")[0]
	names := map[string]measurev1.GossipState{}
	for _, m := range first.GetMembers() {
		names[m.GetNodeName()] = m.GetState()
	}
	if first.GetDelta() || names["node-a"] != alive || names["node-b"] != alive {
		t.Errorf("node-a's first view: delta %v, members %v; want a whole view with node-a and node-b alive", first.GetDelta(), names)
	}
}

// TestGossipRefusesUnregisteredMember: once the coordinator's Endpoints
// name the registered nodes, an agent's gossip does not take a member of
// another name, even on loopback (where its own gossip runs): a ghost
// that joins it directly is not in its view when a registered agent
// joined after it is.
func TestGossipRefusesUnregisteredMember(t *testing.T) {
	const alive = measurev1.GossipState_GOSSIP_STATE_ALIVE
	gc := newGossipCoordinator(true)
	gc.quiet = map[string]bool{"node-a": true}
	gc.push = map[string]chan *agentv1.ConnectResponse{"node-a": make(chan *agentv1.ConnectResponse, 2)}
	target := startFake(t, gc.connect)
	cfgA := baseConfig(t, target, "node-a")
	cfgA.GossipPort = testnet.FreePort(t)
	runGossipAgent(t, cfgA)
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a registered", func() bool { return gc.registration("node-a") != nil })
	host := func(name string) *agentv1.NodeEndpoint {
		return &agentv1.NodeEndpoint{NodeName: name, Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.0.1"}}}
	}
	gc.push["node-a"] <- &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: &agentv1.Endpoints{
		Nodes: []*agentv1.NodeEndpoint{host("node-a"), host("node-b")}}}}
	// Messages are taken in order: the first view means the Endpoints
	// were applied.
	gc.push["node-a"] <- &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_GossipReporting{
		GossipReporting: &agentv1.GossipReporting{Report: true}}}
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a's first view", func() bool { return len(gc.messages("node-a")) > 0 })

	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr = "ghost", "127.0.0.1"
	mc.BindPort = int(testnet.FreePort(t))
	mc.AdvertisePort = mc.BindPort
	mc.Logger = log.New(io.Discard, "", 0)
	ghost, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ghost.Shutdown() }()
	if _, err := ghost.Join([]string{fmt.Sprintf("127.0.0.1:%d", cfgA.GossipPort)}); err != nil {
		t.Fatalf("ghost joins node-a: %v", err)
	}

	cfgB := baseConfig(t, target, "node-b")
	cfgB.GossipPort = testnet.FreePort(t)
	runGossipAgent(t, cfgB)
	testutil.Eventually(t, time.Minute, 20*time.Millisecond, "node-a sees node-b alive", func() bool { return gc.view("node-a")["node-b"] == alive })
	if v := gc.view("node-a"); v["ghost"] != measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED {
		t.Errorf("node-a's view %v lists the unregistered ghost", v)
	}
}
