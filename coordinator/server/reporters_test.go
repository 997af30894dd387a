package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestGossipReporters: the coordinator takes gossip views from at most
// GossipReporters agents; the others that gossip are told to be quiet
// (agents that do not gossip are told nothing), and when a reporter's
// session ends a quiet agent is made a reporter, over real gRPC.
func TestGossipReporters(t *testing.T) {
	// Heartbeats every minute: no session of the test times out, so every
	// promotion comes from the registry's bookkeeping, not from a session
	// that went silent.
	c := startWith(t, func(rc *registry.Config) { rc.GossipReporters, rc.HeartbeatInterval = 2, time.Minute })
	ctx := testnet.Ctx(t, 10*time.Second)
	type agent struct {
		stream agentv1.AgentService_ConnectClient
		end    context.CancelFunc
		quiet  bool
	}
	agents := map[string]*agent{}
	for i, tt := range []struct {
		node      string
		gossip    bool
		wantQuiet bool
	}{
		{"g1", true, false},
		{"g2", true, false},
		{"g3", true, true},
		{"plain", false, false},
		{"g4", true, true},
	} {
		sctx, end := context.WithCancel(ctx)
		t.Cleanup(end)
		reg := &agentv1.Register{NodeName: tt.node, ProtocolVersion: protocol.Version, AgentVersion: "test",
			Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: fmt.Sprintf("127.0.1.%d", i+1)}}}
		if tt.gossip {
			reg.GossipPort = 7946
		}
		stream, err := c.agent.Connect(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}}); err != nil {
			t.Fatal(err)
		}
		m, err := stream.Recv()
		if err != nil || m.GetRegistered() == nil {
			t.Fatalf("%s: first answer %v, %v; want Registered", tt.node, m, err)
		}
		a := &agent{stream: stream, end: end, quiet: m.GetRegistered().GetGossipQuiet()}
		agents[tt.node] = a
		if a.quiet != tt.wantQuiet {
			t.Errorf("%s: gossip_quiet %v, want %v", tt.node, a.quiet, tt.wantQuiet)
		}
	}
	// g1 leaves: one of the quiet ones (g3, g4) is told to report.
	agents["g1"].end()
	promoted := make(chan string, 2)
	for _, name := range []string{"g3", "g4"} {
		go func() {
			for {
				m, err := agents[name].stream.Recv()
				if err != nil {
					return
				}
				if r := m.GetGossipReporting(); r != nil {
					if r.GetReport() {
						promoted <- name
					}
					return
				}
			}
		}()
	}
	select {
	case name := <-promoted:
		t.Logf("%s made a reporter", name)
	case <-time.After(10 * time.Second):
		t.Fatal("no quiet agent was made a reporter after a reporter left")
	}
	select {
	case name := <-promoted:
		t.Errorf("%s made a reporter too: more than GossipReporters", name)
	case <-time.After(200 * time.Millisecond):
	}
	// g2, a reporter, reconnects without gossip: its slot goes to the
	// other quiet agent.
	reg := &agentv1.Register{NodeName: "g2", ProtocolVersion: protocol.Version, AgentVersion: "test",
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.1.2"}}}
	stream, err := c.agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: reg}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetRegistered() == nil || m.GetRegistered().GetGossipQuiet() {
		t.Fatalf("g2 again: %v, %v; want Registered, not quiet (it does not gossip)", m, err)
	}
	select {
	case name := <-promoted:
		t.Logf("%s made a reporter in g2's place", name)
	case <-time.After(10 * time.Second):
		t.Fatal("no quiet agent was made a reporter after a reporter reconnected without gossip")
	}
}
