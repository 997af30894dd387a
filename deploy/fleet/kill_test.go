package fleet_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/deploy/fleet"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// coordinatorBin is the coordinator binary TestMain builds.
var coordinatorBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meshperf-fleet-bin-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	if out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/meshperf/meshperf/cmd/coordinator").CombinedOutput(); err != nil {
		fmt.Printf("build the coordinator: %v\n%s", err, out)
		os.Exit(1)
	}
	coordinatorBin = filepath.Join(dir, "coordinator")
	code := m.Run()
	if code == 0 {
		// goleak.VerifyTestMain would exit before the cleanup: Find is its check.
		if err := goleak.Find(); err != nil {
			fmt.Println("goleak:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestNoReportLostOnCoordinatorKill runs a real coordinator process and a
// simulated fleet whose agents report every second and, like real agents,
// keep each report until it is acknowledged and send the unacknowledged
// ones again after every registration. The coordinator is killed with
// SIGKILL mid-stream and started again on the same store. Every report
// the coordinator acknowledged, before or after the kill, must be in the
// store, and no period may be stored twice.
func TestNoReportLostOnCoordinatorKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "coordinator.yaml")
	if err := os.WriteFile(conf, []byte("probes: {interval: 1s, report_interval: 1s, kinds: [icmp, tcp], paths: [host-host]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentAddr, metricsAddr := freeAddr(t), freeAddr(t)
	coord, err := fleet.StartCoordinator(ctx, coordinatorBin, dir, conf, agentAddr, metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	const nodes = 8
	f, err := fleet.New(fleet.Config{Coordinator: agentAddr, Nodes: nodes, Reports: true})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.Run(fctx) }()
	defer func() { stopFleet(); <-fleetDone }() //nolint:errcheck // waits for it to end: stopped here, its error is the stop's

	waitAcked := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for f.Snapshot().Acked < n {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d reports acknowledged after 60 s: %+v (coordinator log %s)", n, f.Snapshot(), filepath.Join(dir, "coordinator.log"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAcked(3 * nodes)
	coord.Kill()
	before := f.Snapshot()
	time.Sleep(1500 * time.Millisecond) // reports pile up unacknowledged meanwhile
	if coord, err = fleet.StartCoordinator(ctx, coordinatorBin, dir, conf, agentAddr, metricsAddr); err != nil {
		t.Fatal(err)
	}
	waitAcked(before.Acked + 4*nodes)
	stopFleet()
	<-fleetDone //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
	fleetDone <- nil
	coord.Stop()

	st, err := store.Open(store.Config{Path: filepath.Join(dir, "meshperf.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	acked := f.Acked()
	total := 0
	for i := range nodes {
		src := fleet.NodeName(i)
		dst := fleet.NodeName((i + 1) % nodes)
		samples, err := st.Series(ctx, series.Key{Src: src, Dst: dst, Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_TCP},
			time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		starts := map[time.Time]int{}
		for _, s := range samples {
			starts[s.Start.UTC()]++
		}
		for start, n := range starts {
			if n > 1 {
				t.Errorf("%s->%s: the period starting %v is stored %d times", src, dst, start, n)
			}
		}
		for seq, start := range acked[src] {
			if starts[start.UTC()] == 0 {
				t.Errorf("%s: report %d (period from %v) was acknowledged but is not in the store", src, seq, start)
			}
		}
		total += len(acked[src])
	}
	if total < int(before.Acked)+4*nodes {
		t.Fatalf("%d acknowledged reports checked, want at least %d", total, before.Acked+4*nodes)
	}
	t.Logf("%d acknowledged reports of %d nodes all stored once across a SIGKILL (%d acknowledged before it)", total, nodes, before.Acked)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
}
