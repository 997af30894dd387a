package cli

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/report"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestTablesShowPingLoss: the trigger table and the results table show a
// ping result's loss when it is above zero, next to its RTT, and the
// message of an OK result (its notes), not only failures' (issue 11).
func TestTablesShowPingLoss(t *testing.T) {
	hh, ping := measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING
	result := func(id, dst string, tx, rx uint32) *measurev1.Result {
		return &measurev1.Result{TestId: id, RunId: "r1", SrcNode: "a", DstNode: dst, Path: hh, Spec: &measurev1.TestSpec{Test: ping},
			Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
				PacketsTransmitted: tx, PacketsReceived: rx, LossRatio: 1 - float64(rx)/float64(tx),
				RttAvgSeconds: 1.2e-3, RttMedianSeconds: proto.Float64(1.2e-3)}}}
	}
	run := &measurev1.Run{RunId: "r1", Planned: []*measurev1.PlannedTest{
		{TestId: "t1", SrcNode: "a", DstNode: "b", Path: hh, Spec: &measurev1.TestSpec{Test: ping}},
		{TestId: "t2", SrcNode: "a", DstNode: "c", Path: hh, Spec: &measurev1.TestSpec{Test: ping}},
	}}
	results := []*measurev1.Result{result("t1", "b", 5, 3), result("t2", "c", 5, 5)}
	results[0].Message = "ping exited 2 after a complete result: ping: recvmsg: Invalid argument"
	tests := []struct {
		name  string
		print func(o *options)
	}{
		{"trigger", func(o *options) { printPairPaths(o, run, report.Build(run, results)) }},
		{"results", func(o *options) { printResults(o, results) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.print(&options{stdout: &out})
			var lossy, clean string
			for _, line := range strings.Split(out.String(), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) > 2 && f[0] == "a" && f[1] == "b", len(f) > 3 && f[1] == "a" && f[2] == "b", len(f) > 4 && f[2] == "a" && f[3] == "b":
					lossy = line
				case len(f) > 2 && f[0] == "a" && f[1] == "c", len(f) > 3 && f[1] == "a" && f[2] == "c", len(f) > 4 && f[2] == "a" && f[3] == "c":
					clean = line
				}
			}
			if !strings.Contains(lossy, "1.2ms loss 40%") {
				t.Errorf("row a -> b %q does not show 1.2ms loss 40%%:\n%s", lossy, out.String())
			}
			if clean == "" || strings.Contains(clean, "loss") {
				t.Errorf("row a -> c %q: want it without loss:\n%s", clean, out.String())
			}
			if !strings.Contains(out.String(), "ping exited 2 after a complete result") {
				t.Errorf("the OK result's message is not shown:\n%s", out.String())
			}
		})
	}
}

func TestMeshWindow(t *testing.T) {
	tests := []struct {
		run  *measurev1.Run
		want string
	}{
		{&measurev1.Run{}, "-"},
		{&measurev1.Run{MeshRounds: 10, MeshRoundCount: 10}, "full"},
		{&measurev1.Run{MeshRounds: 40, MeshRoundCount: 198, Spec: &measurev1.RunSpec{MeshRounds: 40, FirstMeshRound: 120}}, "40/198 from 120"},
		// A first round from a larger mesh than the run's: counted modulo.
		{&measurev1.Run{MeshRounds: 4, MeshRoundCount: 10, Spec: &measurev1.RunSpec{MeshRounds: 4, FirstMeshRound: 13}}, "4/10 from 3"},
	}
	for _, tt := range tests {
		if got := meshWindow(tt.run); got != tt.want {
			t.Errorf("meshWindow(%v) = %q, want %q", tt.run, got, tt.want)
		}
	}
	two := []*measurev1.PlannedTest{{TestId: "t00001"}, {TestId: "t00002"}}
	for _, tt := range []struct {
		run  *measurev1.Run
		want string
	}{
		{&measurev1.Run{RunId: "R1", Planned: two}, "run R1: 2 test(s) planned"},
		{&measurev1.Run{RunId: "R1", Planned: two, MeshRounds: 6, MeshRoundCount: 6}, "run R1: 2 test(s) planned"},
		{&measurev1.Run{RunId: "R1", Planned: two, MeshRounds: 1, MeshRoundCount: 6, Spec: &measurev1.RunSpec{MeshRounds: 1, FirstMeshRound: 8}},
			"run R1: 2 test(s) planned: 1 of the mesh's 6 rounds, from round 2"},
	} {
		if got := plannedLine(tt.run); got != tt.want {
			t.Errorf("plannedLine = %q, want %q", got, tt.want)
		}
	}
}
