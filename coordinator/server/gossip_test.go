package server_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// startLiveAgent plays a fake agent that keeps its session: it sends
// heartbeats (until muted), records every Work it gets, and sends gossip
// views on demand (sendView).
func startLiveAgent(t *testing.T, ctx context.Context, c *coordinator, reg *agentv1.Register) *fakeagent.Agent {
	t.Helper()
	return fakeagent.Play(t, ctx, c.agent, reg, fakeagent.Config{Heartbeat: heartbeat})
}

// sendView sends a gossip view of a: member name to state. A failed send
// shows as the view missing.
func sendView(a *fakeagent.Agent, states map[string]measurev1.GossipState) {
	v := &agentv1.GossipView{}
	for n, s := range states {
		v.Members = append(v.Members, &agentv1.GossipMember{NodeName: n, State: s, Address: "127.0.0.1:7946"})
	}
	_ = a.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_GossipView{GossipView: v}})
}

func registerAt(node, hostIP, podIP string, gossipPort uint32) *agentv1.Register {
	r := register(node)
	r.Addresses[0].Ip, r.Addresses[1].Ip = hostIP, podIP
	r.GossipPort = gossipPort
	return r
}

// gossipOf is the coordinator's gossip report on a node.
type gossipOf struct {
	State     meshv1.NodeState
	Gossip    measurev1.GossipState
	AliveBy   []string
	DeadBy    []string
	Partition string
}

func agentsGossip(t *testing.T, ctx context.Context, c *coordinator) map[string]gossipOf {
	t.Helper()
	resp, err := c.mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]gossipOf{}
	for _, a := range resp.GetAgents() {
		out[a.GetNodeName()] = gossipOf{a.GetState(), a.GetGossipState(), a.GetGossipAliveBy(), a.GetGossipDeadBy(), a.GetPartition()}
	}
	return out
}

// TestGossip walks fake agents through gossip: seeds at registration, one
// reporter's dead (ignored: no quorum), a quorum's dead about a connected
// node (a partition, but the node stays ready while its heartbeats are
// recent), the same node once its heartbeats stop (unavailable, its tests
// failed at once without any work sent), its recovery, and a node the
// coordinator lost while gossip sees it alive.
func TestGossip(t *testing.T) {
	const (
		alive = measurev1.GossipState_GOSSIP_STATE_ALIVE
		dead  = measurev1.GossipState_GOSSIP_STATE_DEAD
	)
	c := startWith(t, func(rc *registry.Config) {
		rc.PartitionGrace, rc.GossipSettle = -1, -1 // partitions at once; views count at once
		rc.HeartbeatTimeout = time.Minute           // a muted agent stays connected
	})
	ctx := testnet.Ctx(t, 10*time.Second)
	n1 := startLiveAgent(t, ctx, c, registerAt("node-1", "127.0.0.1", "127.0.0.2", 7946))
	n2 := startLiveAgent(t, ctx, c, registerAt("node-2", "127.0.0.3", "127.0.0.4", 7947))
	n3 := startLiveAgent(t, ctx, c, registerAt("node-3", "127.0.0.5", "127.0.0.6", 0))
	for _, tt := range []struct {
		name string
		a    *fakeagent.Agent
		want []string
	}{
		{"first", n1, nil},
		{"second", n2, []string{"127.0.0.1:7946"}},
		{"without gossip", n3, []string{"127.0.0.1:7946", "127.0.0.3:7947"}},
	} {
		if got := tt.a.Registered().GetGossipSeeds(); !slices.Equal(got, tt.want) {
			t.Errorf("%s agent's seeds = %q, want %q", tt.name, got, tt.want)
		}
	}
	n4 := startLiveAgent(t, ctx, c, registerAt("node-4", "127.0.0.7", "127.0.0.8", 7948))
	ready := meshv1.NodeState_NODE_STATE_READY
	check := func(name string, want map[string]gossipOf) {
		t.Helper()
		var got map[string]gossipOf
		waitUntil(t, ctx, name, func() bool {
			got = agentsGossip(t, ctx, c)
			return cmp.Equal(want, got, cmpopts.EquateEmpty())
		}, func() string { return cmp.Diff(want, got, cmpopts.EquateEmpty()) })
	}

	sendView(n1, map[string]measurev1.GossipState{"node-1": alive, "node-2": dead})
	sendView(n2, map[string]measurev1.GossipState{"node-1": alive, "node-2": alive})
	check("node-1 alone declares node-2 dead: no quorum", map[string]gossipOf{
		"node-1": {State: ready, Gossip: alive, AliveBy: []string{"node-2"}},
		"node-2": {State: ready, Gossip: measurev1.GossipState_GOSSIP_STATE_SUSPECT, DeadBy: []string{"node-1"}},
		"node-3": {State: ready},
		"node-4": {State: ready},
	})
	sendView(n4, map[string]measurev1.GossipState{"node-1": alive, "node-2": dead})
	quorum := map[string]gossipOf{
		"node-1": {State: ready, Gossip: alive, AliveBy: []string{"node-2", "node-4"}},
		"node-2": {State: ready, Gossip: dead, DeadBy: []string{"node-1", "node-4"},
			Partition: "the coordinator is connected to node-2, but the gossip of node-1, node-4 declares it dead"},
		"node-3": {State: ready},
		"node-4": {State: ready},
	}
	check("node-1 and node-4 declare node-2 dead: a quorum, but node-2's session is live", quorum)
	if deadBy, gone := c.reg.GossipGone("node-2"); gone {
		t.Errorf("GossipGone(node-2) = %v, %v while its session is live; want kept in the mesh", deadBy, gone)
	}

	// node-2's heartbeats stop, its stream open: now gossip's quorum counts.
	n2.Mute(true)
	n2Hung := maps.Clone(quorum)
	n2Hung["node-2"] = gossipOf{State: meshv1.NodeState_NODE_STATE_UNAVAILABLE, Gossip: dead, DeadBy: []string{"node-1", "node-4"},
		Partition: quorum["node-2"].Partition}
	check("node-2 silent", n2Hung)

	// A run over node-1 -> node-2 fails at once, and no agent got work.
	resp, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_QPERF_TCP_LAT}, {Test: measurev1.Test_TEST_PING}},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, Repeats: 1,
		Pairs: []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "node-2"}, {SrcNode: "node-2", DstNode: "node-3"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := c.mesh.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: resp.GetRun().GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	var results []*measurev1.Result
	for {
		u, err := watch.Recv()
		if err != nil {
			break
		}
		results = append(results, u.GetResults()...)
	}
	if len(results) != 4 {
		t.Fatalf("%d results, want 4 (2 tests x 2 pairs): %v", len(results), results)
	}
	for _, r := range results {
		if r.GetStatus() != measurev1.Status_STATUS_AGENT_UNAVAILABLE || !strings.Contains(r.GetMessage(), `node "node-2": gossip declares it dead (the gossip of node-1, node-4)`) {
			t.Errorf("%s->%s %v: %v %q; want agent_unavailable because gossip declares node-2 dead",
				r.GetSrcNode(), r.GetDstNode(), r.GetSpec().GetTest(), r.GetStatus(), r.GetMessage())
		}
	}
	for name, a := range map[string]*fakeagent.Agent{"node-1": n1, "node-2": n2, "node-3": n3, "node-4": n4} {
		if n := len(a.Works()); n != 0 {
			t.Errorf("%s got %d works; none should be sent while node-2 is gossip-dead and silent", name, n)
		}
	}

	// node-2 speaks again, and comes back in the gossip.
	n2.Mute(false)
	sendView(n1, map[string]measurev1.GossipState{"node-1": alive, "node-2": alive})
	sendView(n4, map[string]measurev1.GossipState{"node-1": alive, "node-2": alive})
	check("node-2 alive again", map[string]gossipOf{
		"node-1": {State: ready, Gossip: alive, AliveBy: []string{"node-2", "node-4"}},
		"node-2": {State: ready, Gossip: alive, AliveBy: []string{"node-1", "node-4"}},
		"node-3": {State: ready},
		"node-4": {State: ready},
	})

	// The coordinator loses node-1 while node-2's and node-4's gossip
	// still see it; node-1's own view goes with its session.
	n1.Stop()
	check("node-1 lost", map[string]gossipOf{
		"node-1": {State: meshv1.NodeState_NODE_STATE_UNAVAILABLE, Gossip: alive, AliveBy: []string{"node-2", "node-4"},
			Partition: "the coordinator lost node-1, but the gossip of node-2, node-4 sees it alive"},
		"node-2": {State: ready, Gossip: alive, AliveBy: []string{"node-4"}},
		"node-3": {State: ready},
		"node-4": {State: ready},
	})
	// Then gossip agrees.
	sendView(n2, map[string]measurev1.GossipState{"node-1": dead, "node-2": alive})
	sendView(n4, map[string]measurev1.GossipState{"node-1": dead, "node-2": alive})
	check("node-1 dead for gossip too", map[string]gossipOf{
		"node-1": {State: meshv1.NodeState_NODE_STATE_UNAVAILABLE, Gossip: dead, DeadBy: []string{"node-2", "node-4"}},
		"node-2": {State: ready, Gossip: alive, AliveBy: []string{"node-4"}},
		"node-3": {State: ready},
		"node-4": {State: ready},
	})
}

// waitUntil polls cond; the test fails with diff() if ctx ends first. The
// bound only turns a hang into a failure.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool, diff func() string) {
	t.Helper()
	if err := testutil.PollContext(ctx, 10*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: gave up: %v (-want +got):\n%s", what, err, diff())
	}
}
