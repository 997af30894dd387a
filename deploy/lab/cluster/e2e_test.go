package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil/labtest"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// bins returns the directory of the agent and coordinator binaries
// (built once, labtest.Binaries), or skips t when the process is not
// root: every end-to-end test builds a lab of network namespaces.
func bins(t *testing.T) string {
	t.Helper()
	testskip.Root(t, "the end-to-end tests build network namespaces")
	return labtest.Binaries(t)
}

// TestMain fails the tests if a goroutine outlives them and removes the
// binaries built for them.
func TestMain(m *testing.M) { labtest.Main(m) }

// env is a lab with meshperf running in it.
type env struct {
	lab *lab.Lab
	c   *cluster.Cluster
	bin string // the agent and coordinator binaries
}

// startEnv brings up a lab under a unique prefix and meshperf in it; both
// are torn down when the test ends, and the logs are printed if it failed.
func startEnv(t *testing.T, ctx context.Context, cfg lab.Config) *env {
	t.Helper()
	return startEnvIn(t, ctx, cfg, t.TempDir())
}

// startEnvIn is startEnv with the cluster's work directory (its store) given,
// so that labs started one after the other share one store.
func startEnvIn(t *testing.T, ctx context.Context, cfg lab.Config, work string) *env {
	t.Helper()
	return startEnvWith(t, ctx, cfg, work, nil)
}

// startEnvWith is startEnvIn with the cluster's Config changed by edit, if
// set.
func startEnvWith(t *testing.T, ctx context.Context, cfg lab.Config, work string, edit func(*cluster.Config)) *env {
	t.Helper()
	bin := bins(t)
	e := labtest.Start(t, ctx, labtest.Options{Name: "e2e", Lab: cfg, BinDir: bin, WorkDir: work, Edit: edit})
	return &env{lab: e.Lab, c: e.Cluster, bin: bin}
}

// cli runs the coordinator CLI from the root namespace: it reaches the
// coordinator over the unix socket only, never over a lab address.
func (e *env) cli(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	args = append([]string{"--coordinator", "unix://" + e.c.SocketPath()}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "coordinator"), args...)
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err = cmd.Run()
	return o.String(), s.String(), err
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return ls[len(ls)-1]
}

// decode decodes `trigger -o json` / `results -o json` output into m.
func decode(t *testing.T, out string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(out), m); err != nil {
		t.Fatalf("decode %T: %v\n%s", m, err, out)
	}
}

// TestFullMeshSurvivesRestart runs a short full mesh through the real tools
// and real gRPC on a 3-node host-gw lab, checks every pair-path and the
// plausibility of the figures, kills the coordinator with SIGKILL, starts it
// again, and checks that `coordinator results` returns the same results.
func TestFullMeshSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, lab.Config{Nodes: 3, Mode: lab.ModeHostGW})

	stdout, stderr, err := e.cli(ctx, "trigger", "-o", "json", "--duration", "1s", "--ping-count", "3")
	if err != nil {
		t.Fatalf("trigger: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if got, want := lastLine(stderr), "24/24 pair-paths OK"; got != want {
		t.Fatalf("verdict %q, want %q\nstderr:\n%s", got, want, stderr)
	}
	var done meshv1.WatchRunResponse
	decode(t, stdout, &done)
	run := done.GetRun()
	if run.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Errorf("run state %v, want SUCCEEDED", run.GetState())
	}
	// 6 ordered pairs x (ping: 3 paths, not pod-service, x 3 repeats; qperf
	// tcp_lat, tcp_bw and iperf3: 4 paths x 1; HTTP: 4 paths x 5 repeats).
	if got, want := len(done.GetResults()), 6*(3*3+3*4+4*5); got != want {
		t.Errorf("%d results, want %d", got, want)
	}
	for _, r := range done.GetResults() {
		checkPlausible(t, r)
	}

	before := results(t, ctx, e, run.GetRunId())
	if len(before) != len(done.GetResults()) {
		t.Fatalf("`results --run` gives %d results, trigger gave %d", len(before), len(done.GetResults()))
	}
	if err := e.c.StopCoordinator(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := e.c.StartCoordinator(ctx); err != nil {
		t.Fatal(err)
	}
	after := results(t, ctx, e, run.GetRunId())
	if len(after) != len(before) {
		t.Fatalf("after restart: %d results, before: %d", len(after), len(before))
	}
	for i := range before {
		if !proto.Equal(before[i], after[i]) {
			t.Errorf("result %d differs after restart:\nbefore %v\nafter  %v", i, before[i], after[i])
		}
	}
	// The per-pair query is one cursor scan and must agree with the run.
	stdout, _, err = e.cli(ctx, "results", "-o", "json", "--src", "node-1", "--dst", "node-2", "--path", "pod-pod", "--test", "iperf3_tcp")
	if err != nil {
		t.Fatal(err)
	}
	var pair meshv1.ListResultsResponse
	decode(t, stdout, &pair)
	if n := len(pair.GetResults()); n != 1 {
		t.Errorf("results for node-1 -> node-2 pod-pod iperf3_tcp: %d, want 1", n)
	}
	if err := e.c.WaitAgents(ctx, 3); err != nil {
		t.Errorf("agents did not reconnect to the restarted coordinator: %v", err)
	}
}

func results(t *testing.T, ctx context.Context, e *env, runID string) []*measurev1.Result {
	t.Helper()
	stdout, stderr, err := e.cli(ctx, "results", "-o", "json", "--run", runID, "--limit", "0")
	if err != nil {
		t.Fatalf("results: %v\n%s", err, stderr)
	}
	var resp meshv1.ListResultsResponse
	decode(t, stdout, &resp)
	return resp.GetResults()
}

// checkPlausible checks that an OK result's figures fit veth in a lab:
// round trips and latencies between 1 us and 20 ms (the slowest of a
// ping's replies 50 ms), so that a slip of ms stored as s, or the
// reverse, lands outside; an HTTP exchange between 10 us and 500 ms (a
// connect on a loaded 2-core machine has taken 220 ms); bandwidth between
// 100 Mbit/s and 1 Tbit/s (a slip of kbit/s or Gbit/s stored as bit/s
// lands outside). These are sanity bounds, not timing assertions.
func checkPlausible(t *testing.T, r *measurev1.Result) {
	t.Helper()
	where := fmt.Sprintf("%s->%s %v %v", r.GetSrcNode(), r.GetDstNode(), r.GetPath(), r.GetSpec().GetTest())
	if r.GetStatus() != measurev1.Status_STATUS_OK {
		t.Errorf("%s: status %v: %s", where, r.GetStatus(), r.GetMessage())
		return
	}
	if r.GetToolVersion() == "" {
		t.Errorf("%s: no tool version", where)
	}
	between := func(what string, v, lo, hi float64) {
		if !(v > lo && v < hi) {
			t.Errorf("%s: %s = %g, want in (%g, %g)", where, what, v, lo, hi)
		}
	}
	const (
		minRTT, maxRTT   = 1e-6, 20e-3 // s: veth and loopback
		maxSlowest       = 50e-3       // s: a ping's slowest reply, its mdev
		minHTTP, maxHTTP = 1e-5, 0.5   // s: curl's whole exchange
		minBW, maxBW     = 1e8, 1e12   // bit/s
	)
	switch m := r.GetMetrics().(type) {
	case *measurev1.Result_Ping:
		p := m.Ping
		between("rtt_min_seconds", p.GetRttMinSeconds(), minRTT, maxRTT)
		between("rtt_avg_seconds", p.GetRttAvgSeconds(), minRTT, maxRTT)
		between("rtt_max_seconds", p.GetRttMaxSeconds(), minRTT, maxSlowest)
		between("rtt_median_seconds", p.GetRttMedianSeconds(), minRTT, maxRTT)
		if v := p.GetRttMdevSeconds(); !(v >= 0 && v < maxSlowest) { // 0 when every reply took as long
			t.Errorf("%s: rtt_mdev_seconds = %g, want in [0, %g)", where, v, maxSlowest)
		}
		between("loss_ratio+1", p.GetLossRatio()+1, 0.999, 1.001)
	case *measurev1.Result_Qperf:
		if r.GetSpec().GetTest() == measurev1.Test_TEST_QPERF_TCP_LAT {
			between("latency_seconds", m.Qperf.GetLatencySeconds(), minRTT, maxRTT)
		} else {
			between("throughput_bps", m.Qperf.GetThroughputBps(), minBW, maxBW)
		}
	case *measurev1.Result_Iperf3:
		between("throughput_bps", m.Iperf3.GetThroughputBps(), minBW, maxBW)
	case *measurev1.Result_Http:
		h := m.Http
		between("total_seconds", h.GetTotalSeconds(), minHTTP, maxHTTP)
		between("connect_seconds", h.GetConnectSeconds(), minRTT, maxHTTP)
		if m.Http.GetHttpCode() != 200 {
			t.Errorf("%s: HTTP %d", where, m.Http.GetHttpCode())
		}
	default:
		t.Errorf("%s: OK without metrics", where)
	}
}

// TestCrossNodePodTrafficDropped breaks the pod network the way a CNI with
// missing routes does and checks that meshperf says so: cross-node pod->pod
// fails as unreachable or timeout, host->host stays OK, trigger exits 1.
func TestCrossNodePodTrafficDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, lab.Config{Nodes: 3, Mode: lab.ModeHostGW, DropCrossNodePod: true})

	stdout, stderr, err := e.cli(ctx, "trigger", "-o", "json", "--tests", "ping,qperf_tcp_lat,iperf3_tcp,http",
		"--paths", "host-host,pod-pod", "--duration", "1s", "--ping-count", "2", "--repeats", "1")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("trigger: err %v, want exit status 1\nstderr:\n%s", err, stderr)
	}
	if got, want := lastLine(stderr), "6/12 pair-paths OK, 6 failed"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	var done meshv1.WatchRunResponse
	decode(t, stdout, &done)
	counts := map[string]int{}
	for _, r := range done.GetResults() {
		switch r.GetPath() {
		case measurev1.Path_PATH_HOST_TO_HOST:
			checkPlausible(t, r)
		case measurev1.Path_PATH_POD_TO_POD:
			switch r.GetStatus() {
			case measurev1.Status_STATUS_UNREACHABLE, measurev1.Status_STATUS_TIMEOUT:
				if r.GetMessage() == "" {
					t.Errorf("%v %s->%s: status %v without a reason", r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode(), r.GetStatus())
				}
			default:
				t.Errorf("%v %s->%s pod-pod: status %v (%s), want unreachable or timeout",
					r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode(), r.GetStatus(), r.GetMessage())
			}
			if r.GetMetrics() != nil {
				t.Errorf("failed result carries metrics: %v", r)
			}
		}
		counts[r.GetPath().String()]++
	}
	if want := 6 * 4; counts["PATH_HOST_TO_HOST"] != want || counts["PATH_POD_TO_POD"] != want {
		t.Errorf("results per path %v, want %d each", counts, want)
	}
	// The table names the failures with their status.
	stdout, _, _ = e.cli(ctx, "results", "--run", done.GetRun().GetRunId(), "--path", "pod-pod", "--test", "ping")
	if !strings.Contains(stdout, "unreachable") && !strings.Contains(stdout, "timeout") {
		t.Errorf("results table does not show the failure:\n%s", stdout)
	}
}
