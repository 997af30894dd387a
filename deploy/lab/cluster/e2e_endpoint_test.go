package cluster_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// podIPs returns the pod address each connected agent registered ("" for
// none).
func (e *env) podIPs(ctx context.Context) (map[string]string, error) {
	client, conn, err := e.c.Dial()
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	resp, err := client.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, a := range resp.GetAgents() {
		if !a.GetConnected() {
			continue
		}
		got[a.GetNodeName()] = ""
		for _, ad := range a.GetAddresses() {
			if ad.GetNetwork() == measurev1.Network_NETWORK_POD {
				got[a.GetNodeName()] = ad.GetIp()
			}
		}
	}
	return got, nil
}

// waitPodIP waits until the coordinator lists node as connected with pod
// IP want ("": connected without one).
func (e *env) waitPodIP(t *testing.T, ctx context.Context, node, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last map[string]string
	for {
		got, err := e.podIPs(ctx)
		if err == nil {
			last = got
			if ip, ok := got[node]; ok && ip == want {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("coordinator lists pod IPs %v (last error %v); want %s with %q", last, err, node, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// podPathsOK runs a short mesh on the pod paths and checks every pair-path
// is OK.
func (e *env) podPathsOK(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	stdout, stderr, err := e.cli(ctx, "trigger", "-o", "json", "--tests", "ping,qperf_tcp_lat,http",
		"--paths", "pod-pod,host-pod", "--duration", "1s", "--ping-count", "2", "--repeats", "1")
	if err != nil {
		t.Fatalf("%s: trigger: %v\nstderr:\n%s", what, err, stderr)
	}
	if got, want := lastLine(stderr), "4/4 pair-paths OK"; got != want {
		t.Fatalf("%s: verdict %q, want %q\nstderr:\n%s", what, got, want, stderr)
	}
	var done meshv1.WatchRunResponse
	decode(t, stdout, &done)
	pod := 0
	for _, r := range done.GetResults() {
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			t.Errorf("%s: %v %s->%s %v: %v (%s)", what, r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode(), r.GetPath(), r.GetStatus(), r.GetMessage())
		}
		if r.GetPath() == measurev1.Path_PATH_POD_TO_POD {
			pod++
		}
	}
	if pod == 0 {
		t.Errorf("%s: no pod-pod result", what)
	}
}

// TestEndpointHandshake: agents started with --endpoint-socket and no
// --pod-ip/--pod-netns find their pod endpoint from an `agent endpoint`
// process in the pod's namespace, register its IP, and run pod-path tests
// there; when a node's endpoint is killed the agent withdraws its pod
// address, and when it starts again the agent follows it.
func TestEndpointHandshake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnvWith(t, ctx, lab.Config{Nodes: 2, Mode: lab.ModeHostGW}, t.TempDir(), func(c *cluster.Config) {
		c.EndpointSocket = true
		c.AgentLogLevel = "debug"
	})
	for _, n := range e.lab.Nodes {
		e.waitPodIP(t, ctx, n.Name, n.PodIP.String())
	}
	e.podPathsOK(t, ctx, "first endpoints")

	n2 := e.lab.Nodes[1]
	if err := e.c.StopEndpoint(n2.Name, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitPodIP(t, ctx, n2.Name, "")
	if err := e.c.StartEndpoint(n2.Name); err != nil {
		t.Fatal(err)
	}
	e.waitPodIP(t, ctx, n2.Name, n2.PodIP.String())
	e.podPathsOK(t, ctx, "restarted endpoint")

	b, err := os.ReadFile(e.c.LogPath(n2.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pod endpoint admitted", "pod endpoint gone", "pod endpoint changed"} {
		if c := strings.Count(string(b), want); c == 0 {
			t.Errorf("agent log of %s lacks %q", n2.Name, want)
		}
	}
	// Each change restarts the agent's life, gossip included.
	if strings.Contains(string(b), "gossip off") {
		t.Errorf("agent of %s lost its gossip on an endpoint change", n2.Name)
	}
	if got := strings.Count(string(b), "pod endpoint admitted"); got < 2 {
		t.Errorf("agent of %s admitted its endpoint %d times, want 2", n2.Name, got)
	}
}
