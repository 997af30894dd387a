package webui

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	"github.com/meshperf/meshperf/deploy/lab/forward"
	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/labtest"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// webPort is the UI's port on the control-plane node's loopback, inside
// its host namespace.
const webPort = 7780

// monitorInterval is the light continuous mesh's interval in the lab.
const monitorInterval = 10 * time.Second

// labConfig is the coordinator's config in the lab: a light continuous
// mesh (ping and qperf tcp_lat over host-host and pod-pod every
// monitorInterval, the default samples) and the agents' probes (ICMP and
// TCP every second, reported every 2 s) for the pair page's history.
var labConfig = labtest.LightMeshConfig(0, time.Second)

// TestMain fails the tests if a goroutine outlives them (a lab watcher,
// a browser's reader) and removes the binaries built for them.
func TestMain(m *testing.M) { labtest.Main(m) }

// labEnv is a 3-node lab with meshperf in it and the UI forwarded to the
// root namespace's loopback.
type labEnv struct {
	lab    *lab.Lab
	c      *cluster.Cluster
	client meshv1.MeshServiceClient
	// base is the UI's URL on 127.0.0.1, e.g. http://127.0.0.1:41234.
	base string
	bin  string
}

// requireBrowserLab skips unless root with the lab's and the tests'
// tools and chromium.
func requireBrowserLab(t *testing.T) {
	t.Helper()
	testskip.Lab(t, "make deps installs it", "ip", "iptables", "ping", "qperf", "nsenter")
	requireChromium(t)
}

// startLab brings the lab up under a unique prefix, runs the coordinator
// (with the UI on 127.0.0.1:webPort in node-1's host namespace) and an
// agent per node, and forwards the UI; everything is torn down at the
// test's cleanup, the processes' logs printed if it failed.
func startLab(t *testing.T, ctx context.Context) *labEnv {
	t.Helper()
	bin := labtest.Binaries(t)
	e := labtest.Start(t, ctx, labtest.Options{
		Name: "wu", Lab: lab.Config{Nodes: 3}, BinDir: bin, CoordinatorConfig: labConfig,
		CoordinatorArgs: []string{"--web-listen", fmt.Sprintf("127.0.0.1:%d", webPort)},
		StartTimeout:    time.Minute, LogLines: 40,
	})
	l, c := e.Lab, e.Cluster
	fwd, err := forward.Start(ctx, forward.Config{NetNS: l.ControlPlane().HostNetNSPath, Target: fmt.Sprintf("127.0.0.1:%d", webPort)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() })
	client, conn, err := c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &labEnv{lab: l, c: c, client: client, base: "http://" + fwd.Addr(), bin: bin}
}

// nodes are the lab's node names in order.
func (e *labEnv) nodes() []string {
	var out []string
	for _, n := range e.lab.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// trigger runs `coordinator trigger` (ping and qperf tcp_lat over
// host-host and pod-pod, 1 s) with label and waits (within wait) until
// the run ended; it returns the run's ID.
func (e *labEnv) trigger(ctx context.Context, t *testing.T, label string, wait time.Duration) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "coordinator"), "--coordinator", "unix://"+e.c.SocketPath(),
		"trigger", "--tests", "ping,qperf_tcp_lat", "--paths", "host-host,pod-pod", "--duration", "1s", "--label", label, "--no-wait")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("coordinator trigger: %v: %s", err, errb.String())
	}
	id := strings.TrimSpace(out.String())
	if _, err := e.waitRun(ctx, id, wait); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitRun waits until run id ended, at most wait.
func (e *labEnv) waitRun(ctx context.Context, id string, wait time.Duration) (*measurev1.Run, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return testutil.RunEnded(ctx, e.client, id, 200*time.Millisecond)
}

// monitorRunAfter waits (within wait) for a continuous run that started
// after t0 to end and returns it.
func (e *labEnv) monitorRunAfter(ctx context.Context, t0 time.Time, wait time.Duration) (*measurev1.Run, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		runs, err := e.client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 20})
		if err == nil {
			for _, r := range runs.GetRuns() {
				if strings.HasPrefix(r.GetSpec().GetLabel(), "monitor-") && r.GetCreateTime().AsTime().After(t0) && testspec.RunEnded(r.GetState()) {
					return r, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no continuous run started after %s ended within %v (last error %v)", t0.Format(time.TimeOnly), wait, err) //nolint:errorlint // the last poll's error, nil when the poll succeeded, is context, not the cause
		case <-tick.C:
		}
	}
}
