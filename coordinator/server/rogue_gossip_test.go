package server_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestRogueGossipDeadOfConnectedNode: rogue reporters say a connected node
// (live session, heartbeats every 50 ms) is dead, over real gRPC. Its
// only source's word, a quorum's, and a non-reporter's view all leave it
// ready and given work, with the reason in the coordinator's log.
func TestRogueGossipDeadOfConnectedNode(t *testing.T) {
	const (
		alive = measurev1.GossipState_GOSSIP_STATE_ALIVE
		dead  = measurev1.GossipState_GOSSIP_STATE_DEAD
	)
	ready := meshv1.NodeState_NODE_STATE_READY
	for _, tt := range []struct {
		name    string
		rogues  []*agentv1.Register // each sends a view: victim dead
		want    gossipOf            // the victim
		wantLog string
	}{
		{
			name:    "the victim's only source",
			rogues:  []*agentv1.Register{registerAt("rogue-1", "127.0.3.1", "127.0.4.1", 7946)},
			want:    gossipOf{State: ready, Gossip: measurev1.GossipState_GOSSIP_STATE_SUSPECT, DeadBy: []string{"rogue-1"}},
			wantLog: `msg="gossip's dead ignored: no quorum of the reporters that know the node" node=victim connected=true gossip_dead_by=[rogue-1]`,
		},
		{
			name: "a quorum of rogue reporters",
			rogues: []*agentv1.Register{registerAt("rogue-1", "127.0.3.1", "127.0.4.1", 7946),
				registerAt("rogue-2", "127.0.3.2", "127.0.4.2", 7946)},
			want: gossipOf{State: ready, Gossip: dead, DeadBy: []string{"rogue-1", "rogue-2"},
				Partition: "the coordinator is connected to victim, but the gossip of rogue-1, rogue-2 declares it dead"},
			wantLog: `msg="gossip's quorum declares a connected node dead; the node stays in the mesh while its session's heartbeats are recent" node=victim`,
		},
		{
			name:    "a session that is no reporter",
			rogues:  []*agentv1.Register{registerAt("rogue-1", "127.0.3.1", "127.0.4.1", 0)},
			want:    gossipOf{State: ready},
			wantLog: `msg="gossip view refused" node=rogue-1 suppressed=0 err="gossip view from a session that is not a reporter: node \"rogue-1\" is not a gossip reporter`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			c := startWith(t, func(rc *registry.Config) {
				rc.PartitionGrace, rc.GossipSettle, rc.GossipEvaluateInterval = -1, -1, 10*time.Millisecond
				rc.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			ctx := testnet.Ctx(t, 10*time.Second)
			victim := startLiveAgent(t, ctx, c, registerAt("victim", "127.0.2.1", "127.0.2.2", 0))
			startLiveAgent(t, ctx, c, registerAt("peer", "127.0.2.3", "127.0.2.4", 0))
			for _, reg := range tt.rogues {
				sendView(startLiveAgent(t, ctx, c, reg), map[string]measurev1.GossipState{reg.GetNodeName(): alive, "victim": dead})
			}
			var got gossipOf
			waitUntil(t, ctx, "the victim's verdict", func() bool {
				got = agentsGossip(t, ctx, c)["victim"]
				return cmp.Equal(tt.want, got, cmpopts.EquateEmpty()) && strings.Contains(logs.String(), tt.wantLog)
			}, func() string {
				return cmp.Diff(tt.want, got, cmpopts.EquateEmpty()) + "\nwant log " + tt.wantLog + "\nlog:\n" + logs.String()
			})
			if deadBy, gone := c.reg.GossipGone("victim"); gone {
				t.Errorf("GossipGone(victim) = %v, %v; want kept in the mesh", deadBy, gone)
			}
			if mesh, _ := c.reg.Known(); !strings.Contains(strings.Join(mesh, ","), "victim") {
				t.Errorf("mesh %v lacks victim", mesh)
			}
			// The victim still gets its tests: a ping from it is sent to it,
			// not failed as agent_unavailable.
			resp, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
				Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
				Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, Repeats: 1,
				Pairs: []*measurev1.NodePair{{SrcNode: "victim", DstNode: "peer"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, ctx, "the victim's work", func() bool { return len(victim.Works()) > 0 }, func() string {
				r, _ := c.mesh.GetRun(ctx, &meshv1.GetRunRequest{RunId: resp.GetRun().GetRunId()})
				return "no work reached the victim; run: " + r.String()
			})
		})
	}
}
