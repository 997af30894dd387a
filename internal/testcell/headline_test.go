package testcell

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestPingHeadlineIsTheMedian(t *testing.T) {
	ping := func(m *measurev1.PingMetrics) *measurev1.Result {
		return &measurev1.Result{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_Ping{Ping: m}}
	}
	tests := []struct {
		name string
		m    *measurev1.PingMetrics
		want float64
	}{
		{"median", &measurev1.PingMetrics{RttAvgSeconds: 90e-6, RttMedianSeconds: proto.Float64(40e-6)}, 40e-6},
		{"a median of 0 is a figure, not absent", &measurev1.PingMetrics{RttAvgSeconds: 1e-6, RttMedianSeconds: proto.Float64(0)}, 0},
		{"older agent: the average", &measurev1.PingMetrics{RttAvgSeconds: 90e-6}, 90e-6},
	}
	for _, tt := range tests {
		if got := Headline(ping(tt.m)); got != tt.want {
			t.Errorf("%s: Headline = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{64, "64B"},
		{65536, "64KiB"},
		{1 << 20, "1MiB"},
		{1500, "1500B"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestHeadlineTable: every test of the protocol has a headline title and
// meaning, and its unit follows its tool (throughput for iperf3 and the
// qperf bandwidth tests, time for the rest), so a test added to the
// protocol without a row here fails.
func TestHeadlineTable(t *testing.T) {
	for v := range measurev1.Test_name {
		test := measurev1.Test(v)
		if test == measurev1.Test_TEST_UNSPECIFIED {
			continue
		}
		throughput := testspec.Tool(test) == measurev1.Tool_TOOL_IPERF3 ||
			testspec.Tool(test) == measurev1.Tool_TOOL_QPERF && !IsLatency(test)
		wantUnit := map[bool]string{true: "bit/s", false: "s"}[throughput]
		if Title(test) == strings.ToUpper(testspec.Name(test)) || Meaning(test) == "headline figure" || HigherIsBetter(test) != throughput || Unit(test) != wantUnit {
			t.Errorf("%s: title %q, meaning %q, higher is better %t, unit %q; want a row of its own, throughput %t, unit %s",
				testspec.Name(test), Title(test), Meaning(test), HigherIsBetter(test), Unit(test), throughput, wantUnit)
		}
	}
	if title, meaning := Title(measurev1.Test(99)), Meaning(measurev1.Test(99)); title == "" || meaning == "" {
		t.Errorf("an unknown test's title %q and meaning %q: want neither empty", title, meaning)
	}
}
