package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestGossipLiveness runs the agents' gossip on a 3-node lab: every agent
// is gossip-alive; an agent killed with SIGKILL becomes gossip-dead and
// unavailable, and a run then fails its tests at once as
// agent_unavailable; restarted, it is alive again through the seeds; and
// a node whose gossip traffic is dropped while its agent stays connected
// stays ready (gossip alone never takes out a node whose session is
// live) and is reported as a partition naming both sides.
func TestGossipLiveness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := startEnvWith(t, ctx, lab.Config{Nodes: 3, Mode: lab.ModeHostGW}, t.TempDir(),
		func(c *cluster.Config) { c.PartitionGrace = 3 * time.Second })
	const (
		alive = measurev1.GossipState_GOSSIP_STATE_ALIVE
		dead  = measurev1.GossipState_GOSSIP_STATE_DEAD
	)
	allAlive := func() bool {
		agents := agentsJSON(t, ctx, e)
		if len(agents) != 3 {
			return false
		}
		for _, a := range agents {
			if !a.GetConnected() || a.GetGossipState() != alive || len(a.GetGossipAliveBy()) != 2 || a.GetPartition() != "" ||
				a.GetState() != meshv1.NodeState_NODE_STATE_READY {
				return false
			}
		}
		return true
	}
	pollUntil(t, ctx, "every agent gossip-alive for the two others", allAlive)

	// SIGKILL: no leave message; gossip has to find out.
	if err := e.c.StopAgent("node-2", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var n2 *meshv1.Agent
	pollUntil(t, ctx, "node-2 gossip-dead for node-1 and node-3, and unavailable", func() bool {
		n2 = agentByName(agentsJSON(t, ctx, e), "node-2")
		return n2 != nil && !n2.GetConnected() && n2.GetGossipState() == dead &&
			slices.Equal(n2.GetGossipDeadBy(), []string{"node-1", "node-3"}) &&
			n2.GetState() == meshv1.NodeState_NODE_STATE_UNAVAILABLE && n2.GetPartition() == ""
	})

	// A run: node-2's tests fail at once, without work sent to it.
	stdout, stderr, err := e.cli(ctx, "trigger", "-o", "json", "--tests", "ping", "--paths", "host-host", "--repeats", "1",
		"--pair", "node-1:node-2", "--pair", "node-2:node-3", "--pair", "node-1:node-3")
	if err == nil {
		t.Errorf("trigger with a dead node exited 0; want a failed verdict\n%s", stderr)
	}
	var done meshv1.WatchRunResponse
	decode(t, stdout, &done)
	if got := len(done.GetResults()); got != 3 {
		t.Fatalf("%d results, want 3\n%s", got, stdout)
	}
	for _, r := range done.GetResults() {
		where := r.GetSrcNode() + "->" + r.GetDstNode()
		if r.GetSrcNode() != "node-2" && r.GetDstNode() != "node-2" {
			if r.GetStatus() != measurev1.Status_STATUS_OK {
				t.Errorf("%s: %v %q; want OK", where, r.GetStatus(), r.GetMessage())
			}
			continue
		}
		if r.GetStatus() != measurev1.Status_STATUS_AGENT_UNAVAILABLE ||
			!strings.Contains(r.GetMessage(), `node "node-2": gossip declares it dead`) || !strings.Contains(r.GetMessage(), "no work sent") {
			t.Errorf("%s: %v %q; want agent_unavailable because gossip declares node-2 dead", where, r.GetStatus(), r.GetMessage())
		}
	}

	// Restarted, node-2 joins the pool again through its seeds.
	if err := e.c.StartAgent("node-2"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, ctx, "every agent gossip-alive again after node-2's restart", allAlive)

	// node-3 loses its gossip traffic, not its session: a partition.
	n3, _ := e.lab.Node("node-3")
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		for _, proto := range []string{"udp", "tcp"} {
			argv := n3.HostCommand("iptables", "-w", "-A", chain, "-p", proto, "--dport", "7946", "-j", "DROP")
			if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
			}
		}
	}
	var agents []*meshv1.Agent
	pollUntil(t, ctx, "a partition on node-3", func() bool {
		agents = agentsJSON(t, ctx, e)
		a := agentByName(agents, "node-3")
		// Its session is live: gossip alone does not take it out of the
		// mesh (it stays ready), but the disagreement is reported.
		return a != nil && a.GetConnected() && a.GetGossipState() == dead && a.GetState() == meshv1.NodeState_NODE_STATE_READY &&
			slices.Equal(a.GetGossipDeadBy(), []string{"node-1", "node-2"}) && a.GetPartition() != ""
	})
	want := "the coordinator is connected to node-3, but the gossip of node-1, node-2 declares it dead"
	if got := agentByName(agents, "node-3").GetPartition(); got != want {
		t.Errorf("node-3's partition: %q, want %q", got, want)
	}
	for _, name := range []string{"node-1", "node-2"} {
		if a := agentByName(agents, name); a.GetGossipState() != alive || a.GetPartition() != "" {
			t.Errorf("%s: gossip %v, partition %q; want alive (for the other side of node-3) and none", name, a.GetGossipState(), a.GetPartition())
		}
	}
	table, _, err := e.cli(ctx, "agents")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, "partition: node-3: "+want) {
		t.Errorf("`coordinator agents` does not report the partition:\n%s", table)
	}
	logs, _ := os.ReadFile(e.c.LogPath("coordinator"))
	if !strings.Contains(string(logs), "partition between the coordinator and gossip") {
		t.Errorf("the coordinator logged no partition warning")
	}
}

// agentsJSON is `coordinator agents -o json`; nil if the coordinator does
// not answer.
func agentsJSON(t *testing.T, ctx context.Context, e *env) []*meshv1.Agent {
	t.Helper()
	stdout, _, err := e.cli(ctx, "agents", "-o", "json")
	if err != nil {
		return nil
	}
	var resp meshv1.ListAgentsResponse
	decode(t, stdout, &resp)
	return resp.GetAgents()
}

func agentByName(agents []*meshv1.Agent, name string) *meshv1.Agent {
	for _, a := range agents {
		if a.GetNodeName() == name {
			return a
		}
	}
	return nil
}
