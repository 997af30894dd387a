package report

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestPingCellShowsLoss: a ping cell shows its loss after the RTT when it
// is above zero (issue 11: heavy loss must not read as a plain RTT).
func TestPingCellShowsLoss(t *testing.T) {
	hh, ping := measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING
	res := func(id string, tx, rx uint32, ratio float64) *measurev1.Result {
		return ok(id, "a", "b", hh, &measurev1.Result{Spec: &measurev1.TestSpec{Test: ping}, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
			PacketsTransmitted: tx, PacketsReceived: rx, LossRatio: ratio, RttAvgSeconds: 1.2e-3, RttMedianSeconds: proto.Float64(1.2e-3)}}})
	}
	failed := &measurev1.Result{TestId: "t9", SrcNode: "a", DstNode: "b", Path: hh, Spec: &measurev1.TestSpec{Test: ping},
		Status: measurev1.Status_STATUS_UNREACHABLE, Message: "0/5 echo replies"}
	tests := []struct {
		name    string
		results []*measurev1.Result
		want    string
	}{
		{"no loss", []*measurev1.Result{res("t1", 5, 5, 0)}, "1.2ms"},
		{"heavy loss", []*measurev1.Result{res("t1", 5, 3, 0.4)}, "1.2ms loss 40%"},
		{"pooled over repeats", []*measurev1.Result{res("t1", 5, 5, 0), res("t1", 5, 3, 0.4), res("t1", 5, 5, 0)}, "1.2ms loss 13.3%"},
		{"one in ten thousand", []*measurev1.Result{res("t1", 1000, 999, 0.001), res("t1", 9000, 9000, 0)}, "1.2ms loss 0.01%"},
		{"older agent: loss_ratio without counts", []*measurev1.Result{res("t1", 0, 0, 0.25)}, "1.2ms loss 25%"},
		{"a loss_ratio that is not a ratio is left out", []*measurev1.Result{res("t1", 0, 0, math.NaN())}, "1.2ms"},
		{"a failure shows its status", []*measurev1.Result{res("t1", 5, 3, 0.4), failed}, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &measurev1.Run{Planned: []*measurev1.PlannedTest{planned("t1", "a", "b", hh, ping)}}
			rows := Build(run, tt.results)
			if got := rows[0].Cell(ping); got != tt.want {
				t.Errorf("cell %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormatLoss(t *testing.T) {
	for _, tt := range []struct {
		ratio float64
		want  string
	}{
		{0.4, "loss 40%"}, {1.0 / 3, "loss 33.3%"}, {1e-4, "loss 0.01%"}, {1e-7, "loss <0.001%"}, {1, "loss 100%"},
	} {
		if got := FormatLoss(tt.ratio); got != tt.want {
			t.Errorf("FormatLoss(%v) = %q, want %q", tt.ratio, got, tt.want)
		}
	}
}

func TestNotes(t *testing.T) {
	hh, ping := measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING
	r := func(status measurev1.Status, msg string) *measurev1.Result {
		res := ok("t1", "a", "b", hh, &measurev1.Result{Spec: &measurev1.TestSpec{Test: ping}, Message: msg,
			Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 1e-3}}})
		res.Status = status
		return res
	}
	run := &measurev1.Run{Planned: []*measurev1.PlannedTest{planned("t1", "a", "b", hh, ping)}}
	rows := Build(run, []*measurev1.Result{
		r(measurev1.Status_STATUS_OK, "ping exited 2 after a complete result"), r(measurev1.Status_STATUS_OK, "ping exited 2 after a complete result"),
		r(measurev1.Status_STATUS_OK, ""), r(measurev1.Status_STATUS_OK, "bell\a\x1b[2J"), r(measurev1.Status_STATUS_UNREACHABLE, "0/5 echo replies"),
	})
	got := strings.Join(rows[0].Notes(), "|")
	if want := `ping: ping exited 2 after a complete result|ping: bell\a\x1b[2J`; got != want {
		t.Errorf("notes %q, want %q", got, want)
	}
}
