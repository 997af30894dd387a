package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestPrintDeltas: the compare table has one line per cell, with each
// side's median and count, the change, the p-value and the verdict, and
// the summary line counts the significantly worse and better cells.
func TestPrintDeltas(t *testing.T) {
	ping := func(run, dst string, rtts ...float64) []*measurev1.Result {
		var out []*measurev1.Result
		for _, rtt := range rtts {
			out = append(out, &measurev1.Result{RunId: run, SrcNode: "a", DstNode: dst, Path: measurev1.Path_PATH_HOST_TO_HOST,
				Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Status: measurev1.Status_STATUS_OK,
				Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5, RttAvgSeconds: rtt}}})
		}
		return out
	}
	a := append(ping("A", "b", 1e-3, 1.1e-3, 0.9e-3, 1e-3), ping("A", "c", 1e-3, 1.1e-3, 0.9e-3, 1e-3)...)
	b := append(ping("B", "b", 2e-3, 2.1e-3, 1.9e-3, 2e-3), ping("B", "c", 1e-3)...)
	deltas := testcell.Compare(testcell.Cells(a), testcell.Cells(b))
	var out bytes.Buffer
	printDeltas(&options{stdout: &out}, &measurev1.Run{RunId: "A"}, &measurev1.Run{RunId: "B"}, deltas)
	got := out.String()
	for _, want := range []string{
		"ping  host-host  a    b    1ms (n=4)  2ms (n=4)  +100.0%  2.37e-06  WORSE\n",
		"ping  host-host  a    c    1ms (n=4)  1ms (n=1)  +0.0%    -         not tested\n",
		"2 cells: 1 significantly worse, 0 significantly better",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("compare table lacks %q:\n%s", want, got)
		}
	}
}
