package cluster_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	"github.com/meshperf/meshperf/internal/testutil/labtest"
)

// TestFaultScenarios runs every fault scenario of make demo-faults under a
// fast continuous mesh (probes every second, iperf3 runs every 5 s): each
// fault must be pinned on its node with the right kind from the agents'
// reports in time (by the probe judge, in the report period holding the
// fault's time plus one probe interval; rate-limit by the next iperf3 run),
// and neither the clean stretch nor the faults may blame a healthy node.
func TestFaultScenarios(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	res, err := cluster.DemoFaults(ctx, cluster.FaultsConfig{
		Lab:      lab.Config{Prefix: labtest.Prefix("e2f")},
		BinDir:   bins(t),
		Interval: 5 * time.Second,
		Verbose:  true,
		Stdout:   &stdout, Stderr: &stderr,
	})
	t.Logf("output:\n%s\n%s", stderr.String(), stdout.String())
	if err != nil {
		t.Fatalf("DemoFaults: %v (%s)", err, res)
	}
	want := cluster.FaultsResult{Faults: len(cluster.FaultScenarios), Detected: len(cluster.FaultScenarios), Localised: len(cluster.FaultScenarios)}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if last := lines[len(lines)-1]; last != "faults detected 6/6, localised 6/6, false alarms 0" {
		t.Errorf("last line %q", last)
	}
}
