package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestExternalTarget measures the lab's external host (a namespace on the
// fabric, outside the cluster) as an allowlisted external target, with ping
// and HTTP from every node's host network and pod (whose traffic the lab
// masquerades to the node IP, as a CNI does). Then the external host drops
// one node's traffic, and exactly that node's results fail; another node
// stops forwarding its pod's traffic out; then the external host answers
// nobody. After each, `coordinator diagnose` must name what broke: the
// node's egress, the node's pod egress, the target. A target missing from
// the allowlist is refused before anything runs.
func TestExternalTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := t.TempDir()
	var l *lab.Lab
	e := startEnvWith(t, ctx, lab.Config{}, work, func(c *cluster.Config) {
		l = c.Lab
		conf := filepath.Join(work, "meshperf.yaml")
		if err := os.WriteFile(conf, []byte(cluster.ExternalConfig(l, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		c.CoordinatorArgs = append(c.CoordinatorArgs, "--config", conf)
	})
	srvCtx, stopSrv := context.WithCancel(ctx)
	served, err := cluster.ServeExternal(srvCtx, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopSrv()
		if err := <-served; err != nil {
			t.Errorf("external HTTP server: %v", err)
		}
	})

	stdout, stderr, err := e.cli(ctx, "targets")
	if err != nil || !containsAll(stdout, cluster.ExternalTargetName, l.External.IP.String(), cluster.ExternalURL(l)) {
		t.Fatalf("coordinator targets: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}

	trigger := func(what string) (string, []*measurev1.Result) {
		t.Helper()
		stdout, stderr, err := e.cli(ctx, "trigger", "-o", "json", "--external", cluster.ExternalTargetName,
			"--paths", "host-external,pod-external", "--tests", "ping,http", "--ping-count", "2", "--repeats", "2")
		if err != nil && lastLine(stderr) == "" {
			t.Fatalf("%s: trigger: %v\nstderr:\n%s", what, err, stderr)
		}
		var done meshv1.WatchRunResponse
		decode(t, stdout, &done)
		return lastLine(stderr), results(t, ctx, e, done.GetRun().GetRunId())
	}

	verdict, rs := trigger("healthy")
	if want := "6/6 pair-paths OK"; verdict != want {
		t.Fatalf("healthy: verdict %q, want %q", verdict, want)
	}
	// 3 nodes x 2 paths x 2 tests x 2 repeats.
	if len(rs) != 24 {
		t.Fatalf("healthy: %d results, want 24", len(rs))
	}
	for _, r := range rs {
		if r.GetStatus() != measurev1.Status_STATUS_OK || r.GetDstNode() != cluster.ExternalTargetName ||
			r.GetTargetAddress() != l.External.IP.String() {
			t.Errorf("healthy: %s -> %s %v %v: status %v target %q: %s", r.GetSrcNode(), r.GetDstNode(), r.GetPath(),
				r.GetSpec().GetTest(), r.GetStatus(), r.GetTargetAddress(), r.GetMessage())
		}
		if h := r.GetHttp(); r.GetSpec().GetTest() == measurev1.Test_TEST_HTTP && h.GetHttpCode() != 200 {
			t.Errorf("healthy: %s %v: HTTP code %d", r.GetSrcNode(), r.GetPath(), h.GetHttpCode())
		}
	}

	// The external host drops everything from node-2's IP: its host and
	// (masqueraded) pod traffic.
	bad := l.Nodes[1]
	if out, err := runArgv(ctx, l.External.Command("iptables", "-w", "-A", "INPUT", "-s", bad.HostIP.String(), "-j", "DROP")); err != nil {
		t.Fatalf("iptables in the external host: %v\n%s", err, out)
	}
	verdict, rs = trigger("node-2 dropped")
	if want := "4/6 pair-paths OK, 2 failed"; verdict != want {
		t.Errorf("node-2 dropped: verdict %q, want %q", verdict, want)
	}
	for _, r := range rs {
		ok := r.GetStatus() == measurev1.Status_STATUS_OK
		if ok == (r.GetSrcNode() == bad.Name) {
			t.Errorf("node-2 dropped: %s -> %s %v %v: status %v: %s", r.GetSrcNode(), r.GetDstNode(), r.GetPath(),
				r.GetSpec().GetTest(), r.GetStatus(), r.GetMessage())
		}
	}

	diagnose := func(what, want string) {
		t.Helper()
		stdout, stderr, err := e.cli(ctx, "diagnose")
		if !strings.Contains(stdout, want) || err == nil {
			t.Errorf("%s: coordinator diagnose: err %v, want exit 1 and %q\nstdout:\n%s\nstderr:\n%s", what, err, want, stdout, stderr)
		}
	}
	diagnose("node-2 dropped", "node node-2: egress-broken")

	// node-3 forwards none of its pod's traffic to the external host; its
	// own (host) traffic still goes out.
	pod := l.Nodes[2]
	if out, err := runArgv(ctx, pod.HostCommand("iptables", "-w", "-I", "FORWARD", "-d", l.External.IP.String(), "-j", "DROP")); err != nil {
		t.Fatalf("iptables on node-3: %v\n%s", err, out)
	}
	verdict, _ = trigger("node-2 dropped, node-3 pod egress dropped")
	if want := "3/6 pair-paths OK, 3 failed"; verdict != want {
		t.Errorf("node-3 pod egress dropped: verdict %q, want %q", verdict, want)
	}
	diagnose("node-3 pod egress dropped", "node node-3: pod-egress-broken")

	// The external host answers nobody.
	if out, err := runArgv(ctx, l.External.Command("iptables", "-w", "-I", "INPUT", "-j", "DROP")); err != nil {
		t.Fatalf("iptables in the external host: %v\n%s", err, out)
	}
	if verdict, _ = trigger("external host down"); verdict != "0/6 pair-paths OK, 6 failed" {
		t.Errorf("external host down: verdict %q", verdict)
	}
	diagnose("external host down", "target lab-ext: external-down")

	_, stderr, err = e.cli(ctx, "trigger", "--external", "elsewhere", "--paths", "host-external", "--tests", "ping")
	if err == nil || !containsAll(stderr, `"elsewhere"`, cluster.ExternalTargetName) {
		t.Errorf("trigger of a target outside the allowlist: err %v, want a refusal naming it and the allowlist\nstderr:\n%s", err, stderr)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// runArgv runs an argv list (never a shell string) and returns its output.
func runArgv(ctx context.Context, argv []string) ([]byte, error) {
	return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
}
