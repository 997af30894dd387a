package retention

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// IPv6 results fold into rollups of their own, never into (or over) the
// IPv4 rollup of the same pair-path and hour; IPv4 rollups (results of
// before families included) keep ip_family unset, as before families.
func TestFoldKeepsFamiliesApart(t *testing.T) {
	start := timestamppb.New(time.Date(2026, 1, 1, 10, 5, 0, 0, time.UTC))
	ping := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	res := func(fam measurev1.IPFamily, rtt float64) *measurev1.Result {
		return &measurev1.Result{SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_HOST_TO_HOST, Spec: ping, StartTime: start, IpFamily: fam,
			Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
				PacketsTransmitted: 5, PacketsReceived: 5, RttMinSeconds: rtt, RttAvgSeconds: rtt, RttMaxSeconds: rtt}}}
	}
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	tests := []struct {
		name    string
		results []*measurev1.Result
		want    map[measurev1.IPFamily][2]float64 // family -> samples, max
	}{
		{"ipv4 only", []*measurev1.Result{res(0, 0.001), res(v4, 0.002)},
			map[measurev1.IPFamily][2]float64{0: {2, 0.002}}},
		{"both families", []*measurev1.Result{res(0, 0.001), res(v6, 0.009), res(v4, 0.001), res(v6, 0.008)},
			map[measurev1.IPFamily][2]float64{0: {2, 0.001}, v6: {2, 0.009}}},
		{"ipv6 only", []*measurev1.Result{res(v6, 0.009)},
			map[measurev1.IPFamily][2]float64{v6: {1, 0.009}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fold(tt.results)
			if len(got) != len(tt.want) {
				t.Fatalf("Fold gave %d rollups, want %d: %v", len(got), len(tt.want), got)
			}
			for _, ru := range got {
				w, ok := tt.want[ru.GetIpFamily()]
				if !ok || float64(ru.GetSamples()) != w[0] || ru.GetMaxValue() != w[1] {
					t.Errorf("rollup family %v samples %d max %g, want %v", ru.GetIpFamily(), ru.GetSamples(), ru.GetMaxValue(), tt.want)
				}
			}
		})
	}
}
