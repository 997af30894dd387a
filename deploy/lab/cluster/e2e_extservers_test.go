package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// pingOnly is a second allowlist entry for the lab's external host,
// without server ports: ping and HTTP only.
const pingOnly = "lab-ext-ping"

// TestExternalServers measures iperf3 and qperf from every node's host
// network and pod to real servers on the lab's external host (an iperf3
// server DaemonSet behind a LoadBalancer, seed 003), allowlisted with
// their ports: every test OK with plausible figures, and the stored
// results show one client at a time per server: no two heavy tests'
// [start, start+elapsed] to the target overlap, over two runs at once.
// The same host allowlisted without ports gets ping only, and an iperf3
// test asked of it alone is refused before anything runs.
func TestExternalServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := t.TempDir()
	var l *lab.Lab
	e := startEnvWith(t, ctx, lab.Config{}, work, func(c *cluster.Config) {
		l = c.Lab
		extra := fmt.Sprintf("  - name: %s\n    address: %s\n", pingOnly, l.External.IP)
		conf := filepath.Join(work, "meshperf.yaml")
		if err := os.WriteFile(conf, []byte(cluster.ExternalServersConfig(l, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
		c.CoordinatorArgs = append(c.CoordinatorArgs, "--config", conf)
	})
	stop, err := cluster.ServeExternalServers(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	stdout, stderr, err := e.cli(ctx, "targets")
	if err != nil || !containsAll(strings.Join(strings.Fields(stdout), " "),
		fmt.Sprintf("%s %s %s %d %d/%d", cluster.ExternalTargetName, l.External.IP, cluster.ExternalURL(l),
			cluster.ExternalIperf3Port, cluster.ExternalQperfPort, cluster.ExternalQperfDataPort),
		fmt.Sprintf("%s %s - - -", pingOnly, l.External.IP)) {
		t.Fatalf("coordinator targets: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}

	args := []string{"--external", cluster.ExternalTargetName + "," + pingOnly, "--paths", "host-external,pod-external",
		"--tests", "ping,iperf3_tcp,qperf_tcp_bw,qperf_tcp_lat", "--duration", "1s", "--ping-count", "2", "--repeats", "1"}
	// A second run at once: the two share the servers, one client at a
	// time over both.
	stdout, stderr, err = e.cli(ctx, append([]string{"trigger", "--no-wait"}, args...)...)
	if err != nil {
		t.Fatalf("trigger --no-wait: %v\nstderr:\n%s", err, stderr)
	}
	other := strings.TrimSpace(stdout)
	stdout, stderr, err = e.cli(ctx, append([]string{"trigger", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("trigger: %v\nstderr:\n%s", err, stderr)
	}
	var done meshv1.WatchRunResponse
	decode(t, stdout, &done)
	runIDs := []string{done.GetRun().GetRunId(), other}
	pollFor(t, ctx, "the other run to end", func() string {
		if st := getRun(t, ctx, e, other).GetState(); st == measurev1.RunState_RUN_STATE_RUNNING || st == measurev1.RunState_RUN_STATE_QUEUED {
			return "run " + other + " is " + st.String()
		}
		return ""
	})

	var heavy []*measurev1.Result
	for _, id := range runIDs {
		rs := results(t, ctx, e, id)
		got := map[string]int{}
		for _, r := range rs {
			checkPlausible(t, r)
			got[r.GetDstNode()+" "+testspec.Name(r.GetSpec().GetTest())]++
			if r.GetTargetAddress() != l.External.IP.String() {
				t.Errorf("%s %s: target_address %q, want %s", r.GetSrcNode(), r.GetTestId(), r.GetTargetAddress(), l.External.IP)
			}
			if testspec.IsHeavy(r.GetSpec().GetTest()) {
				heavy = append(heavy, r)
			}
		}
		// 3 nodes x 2 paths; the heavy tests to the target with ports only.
		want := map[string]int{cluster.ExternalTargetName + " ping": 6, pingOnly + " ping": 6,
			cluster.ExternalTargetName + " iperf3_tcp": 6, cluster.ExternalTargetName + " qperf_tcp_bw": 6,
			cluster.ExternalTargetName + " qperf_tcp_lat": 6}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("run %s: results %v, want %v", id, got, want)
		}
	}
	checkOneAtATime(t, heavy)
	for _, r := range heavy {
		t.Logf("%s %s %s %v %v: start %s elapsed %s, %.3g bit/s, %.3g s", r.GetRunId()[20:], r.GetTestId(), r.GetSrcNode(), r.GetPath(),
			r.GetSpec().GetTest(), r.GetStartTime().AsTime().Format("15:04:05.000"), r.GetElapsed().AsDuration(),
			r.GetIperf3().GetThroughputBps()+r.GetQperf().GetThroughputBps(), r.GetQperf().GetLatencySeconds())
	}

	_, stderr, err = e.cli(ctx, "trigger", "--external", pingOnly, "--paths", "host-external", "--tests", "iperf3_tcp")
	if err == nil || !containsAll(stderr, "iperf3_tcp runs nowhere", fmt.Sprintf("external target %q has no iperf3_port", pingOnly)) {
		t.Errorf("iperf3 to a target without its port: err %v, want a refusal naming the target and iperf3_port\nstderr:\n%s", err, stderr)
	}
}

// checkOneAtATime fails t if two of the results' [start, start+elapsed]
// intervals overlap: two clients at the external servers at once.
func checkOneAtATime(t *testing.T, rs []*measurev1.Result) {
	t.Helper()
	slices.SortFunc(rs, func(a, b *measurev1.Result) int { return a.GetStartTime().AsTime().Compare(b.GetStartTime().AsTime()) })
	for i := 1; i < len(rs); i++ {
		prev, next := rs[i-1], rs[i]
		prevEnd := prev.GetStartTime().AsTime().Add(prev.GetElapsed().AsDuration())
		if next.GetStartTime().AsTime().Before(prevEnd) {
			t.Errorf("run %s %s (%s %v %v) started at %s, before run %s %s (%s %v %v) ended at %s",
				next.GetRunId(), next.GetTestId(), next.GetSrcNode(), next.GetPath(), next.GetSpec().GetTest(), next.GetStartTime().AsTime(),
				prev.GetRunId(), prev.GetTestId(), prev.GetSrcNode(), prev.GetPath(), prev.GetSpec().GetTest(), prevEnd)
		}
	}
	if len(rs) < 2 {
		t.Errorf("%d heavy results to check, want several", len(rs))
	}
}
