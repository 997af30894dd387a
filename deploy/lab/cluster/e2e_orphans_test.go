package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestOrphanServersAfterAgentKill kills an agent with SIGKILL in the middle
// of a long iperf3 test, once on the server's side and once on the
// client's, restarts it, and checks that no iperf3 or qperf process is left
// in that node's namespaces once it has registered again, that the other
// side's tool is gone too once the run is over, and that the test is a
// failure with a reason.
func TestOrphanServersAfterAgentKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, lab.Config{Nodes: 2, Mode: lab.ModeHostGW})

	for _, tt := range []struct {
		name   string
		victim string // the node whose agent is killed
		flag   string // the victim's iperf3 process: "-s" server, "-c" client
	}{
		{"server side", "node-2", "-s"},
		{"client side", "node-1", "-c"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			killAgentMidTest(t, ctx, e, tt.victim, tt.flag)
		})
	}
}

func killAgentMidTest(t *testing.T, ctx context.Context, e *env, victim, flag string) {
	stdout, stderr, err := e.cli(ctx, "trigger", "--tests", "iperf3_tcp", "--paths", "pod-pod",
		"--pair", "node-1:node-2", "--duration", "20s", "--repeats", "1", "--no-wait")
	if err != nil {
		t.Fatalf("trigger: %v\n%s", err, stderr)
	}
	runID := strings.TrimSpace(stdout)
	node, ok := e.lab.Node(victim)
	if !ok {
		t.Fatalf("no node %s", victim)
	}

	// Mid-test: the server runs in node-2's pod namespace, recorded in its
	// agent's state file (before the coordinator heard of it), and the
	// client in node-1's.
	var procs map[string]nodeProc // by flag
	pollUntil(t, ctx, "iperf3 server on node-2 and client on node-1", func() bool {
		procs = map[string]nodeProc{}
		for _, w := range []struct{ node, flag string }{{"node-2", "-s"}, {"node-1", "-c"}} {
			n, _ := e.lab.Node(w.node)
			for _, p := range toolProcsOf(t, n) {
				if p.ns == n.PodNetNS && filepath.Base(p.argv[0]) == "iperf3" && slices.Contains(p.argv, w.flag) {
					procs[w.flag] = p
				}
			}
		}
		server, ok := procs["-s"]
		return ok && procs["-c"].pid != 0 && slices.Contains(recordedServerPIDs(t, e, "node-2"), server.pid)
	})
	tool := procs[flag]
	t.Logf("%s's agent killed while iperf3 %s runs: pid %d, %s", victim, flag, tool.pid, strings.Join(tool.argv, " "))

	killed := time.Now()
	if err := e.c.StopAgent(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, ctx, "the coordinator to see "+victim+"'s agent gone", func() bool {
		a := agentState(t, ctx, e, victim)
		return a != nil && !a.GetConnected()
	})
	// Pdeathsig should have taken the tool with the agent; the restarted
	// agent reclaims whatever did not go.
	t.Logf("before the restart, iperf3/qperf in %s's namespaces: %v", victim, toolProcsOf(t, node))

	if err := e.c.StartAgent(victim); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, ctx, victim+"'s agent to register again", func() bool {
		a := agentState(t, ctx, e, victim)
		return a != nil && a.GetConnected() && a.GetConnectTime().AsTime().After(killed)
	})
	if left := toolProcsOf(t, node); len(left) > 0 {
		t.Errorf("after %s's agent restarted and registered: %v still run in its namespaces", victim, left)
	}
	if flag == "-s" {
		// The state file was read, its entry dealt with, and cleared.
		logs, _ := os.ReadFile(e.c.LogPath(victim))
		if !strings.Contains(string(logs), "killed a server left running") && !strings.Contains(string(logs), "recorded server not killed") {
			t.Errorf("%s's agent log says nothing of the recorded server %d", victim, tool.pid)
		}
		if pids := recordedServerPIDs(t, e, victim); slices.Contains(pids, tool.pid) {
			t.Errorf("state file still records server %d after the restart: %v", tool.pid, pids)
		}
	}

	// The run ends with the test failed, and a reason.
	var res []*measurev1.Result
	pollUntil(t, ctx, "run "+runID+"'s result", func() bool {
		res = results(t, ctx, e, runID)
		return len(res) > 0
	})
	for _, r := range res {
		t.Logf("result: %v: %s", r.GetStatus(), r.GetMessage())
		if r.GetStatus() == measurev1.Status_STATUS_OK || r.GetMessage() == "" {
			t.Errorf("%v %s->%s: status %v, message %q; want a failure with a reason",
				r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode(), r.GetStatus(), r.GetMessage())
		}
	}
	// And the other side's tool is gone too: the coordinator stopped the
	// server, or the client ended with its server.
	for _, n := range e.lab.Nodes {
		pollUntil(t, ctx, "no iperf3/qperf in "+n.Name+"'s namespaces", func() bool { return len(toolProcsOf(t, n)) == 0 })
	}
}

// nodeProc is a process in one of a node's namespaces.
type nodeProc struct {
	pid  int
	ns   string
	argv []string
}

func (p nodeProc) String() string {
	return strconv.Itoa(p.pid) + " in " + p.ns + ": " + strings.Join(p.argv, " ")
}

// toolProcsOf lists the iperf3 and qperf processes (nsenter on its way to
// one included) in node's host and pod namespaces, found as deploy/lab's
// Down finds them: by the identity of /proc/PID/ns/net.
func toolProcsOf(t *testing.T, node lab.Node) []nodeProc {
	t.Helper()
	names := map[string]string{node.HostNetNSPath: node.HostNetNS, node.PodNetNSPath: node.PodNetNS}
	procs, err := testutil.ProcsInNetNS(node.HostNetNSPath, node.PodNetNSPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []nodeProc
	for _, p := range procs {
		isTool := func(a string) bool { b := filepath.Base(a); return b == "iperf3" || b == "qperf" }
		if isTool(p.Argv[0]) || (filepath.Base(p.Argv[0]) == "nsenter" && slices.ContainsFunc(p.Argv, isTool)) {
			out = append(out, nodeProc{pid: p.PID, ns: names[p.NetNS], argv: p.Argv})
		}
	}
	return out
}

// recordedServerPIDs returns the PIDs in the state file of node's agent.
func recordedServerPIDs(t *testing.T, e *env, node string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.c.StateDir(node), servers.StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Servers []struct {
			PID int `json:"pid"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file of %s: %v\n%s", node, err, b)
	}
	var pids []int
	for _, s := range st.Servers {
		pids = append(pids, s.PID)
	}
	return pids
}

// agentState returns the coordinator's view of node's agent; nil if it has
// none or does not answer.
func agentState(t *testing.T, ctx context.Context, e *env, node string) *meshv1.Agent {
	t.Helper()
	client, conn, err := e.c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	resp, err := client.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		return nil
	}
	for _, a := range resp.GetAgents() {
		if a.GetNodeName() == node {
			return a
		}
	}
	return nil
}

// pollUntil waits until cond holds, as pollFor does.
func pollUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	pollFor(t, ctx, what, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}
