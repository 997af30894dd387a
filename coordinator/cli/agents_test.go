package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// agentsServer answers ListAgents with fixed agents.
type agentsServer struct {
	meshv1.UnimplementedMeshServiceServer
	agents []*meshv1.Agent
}

func (s *agentsServer) ListAgents(context.Context, *meshv1.ListAgentsRequest) (*meshv1.ListAgentsResponse, error) {
	return &meshv1.ListAgentsResponse{Agents: s.agents}, nil
}

func TestAgentsGossipColumnAndPartitions(t *testing.T) {
	partition := "the coordinator is connected to node-2, but the gossip of node-1, node-3 declares it dead"
	sock := serveMesh(t, &agentsServer{agents: []*meshv1.Agent{
		{NodeName: "node-1", Connected: true, State: meshv1.NodeState_NODE_STATE_READY, GossipState: measurev1.GossipState_GOSSIP_STATE_ALIVE},
		{NodeName: "node-2", Connected: true, State: meshv1.NodeState_NODE_STATE_UNAVAILABLE, GossipState: measurev1.GossipState_GOSSIP_STATE_DEAD,
			GossipDeadBy: []string{"node-1", "node-3"}, Partition: partition},
		{NodeName: "node-3", Connected: true, State: meshv1.NodeState_NODE_STATE_READY},
	}})

	for _, tt := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"table", nil, []string{
			"NODE    STATE        GOSSIP",
			"node-1  ready        alive",
			"node-2  unavailable  dead",
			"node-3  ready        -",
			"partition: node-2: " + partition,
		}},
		{"json", []string{"-o", "json"}, []string{
			`"gossip_state": "GOSSIP_STATE_DEAD"`,
			`"gossip_dead_by": [`,
			`"partition": "` + partition + `"`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs(append([]string{"agents", "--coordinator", "unix://" + sock}, tt.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatalf("agents: %v\n%s", err, errOut.String())
			}
			// protojson varies its spacing on purpose: compare with single spaces.
			got := strings.Join(strings.Fields(out.String()), " ")
			for _, w := range tt.wants {
				if !strings.Contains(got, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tt.args == nil && strings.Count(out.String(), "partition:") != 1 {
				t.Errorf("want one partition line:\n%s", out.String())
			}
		})
	}
}

// serveMesh serves srv as the MeshService on a unix socket in a temporary
// directory until the test ends, and returns the socket's path.
func serveMesh(t *testing.T, srv meshv1.MeshServiceServer) string {
	t.Helper()
	target, _ := testutil.ServeGRPC(t, "unix", func(g *grpc.Server) { meshv1.RegisterMeshServiceServer(g, srv) })
	return strings.TrimPrefix(target, "unix://")
}
