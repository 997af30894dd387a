package testcell

import (
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
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
