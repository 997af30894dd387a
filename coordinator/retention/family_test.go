package retention

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// A Rollup has no family: IPv6 results must not fold into (or overwrite)
// the IPv4 rollup of the same pair-path and hour.
func TestFoldIPv4Only(t *testing.T) {
	start := timestamppb.New(time.Date(2026, 1, 1, 10, 5, 0, 0, time.UTC))
	ping := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	res := func(fam measurev1.IPFamily, rtt float64) *measurev1.Result {
		return &measurev1.Result{SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_HOST_TO_HOST, Spec: ping, StartTime: start, IpFamily: fam,
			Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
				PacketsTransmitted: 5, PacketsReceived: 5, RttMinSeconds: rtt, RttAvgSeconds: rtt, RttMaxSeconds: rtt}}}
	}
	got := Fold([]*measurev1.Result{res(measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, 0.001), res(measurev1.IPFamily_IP_FAMILY_IPV4, 0.001),
		res(measurev1.IPFamily_IP_FAMILY_IPV6, 0.009)})
	if len(got) != 1 || got[0].GetSamples() != 2 || got[0].GetMaxValue() > 0.002 {
		t.Fatalf("Fold = %v, want one rollup of the two IPv4 samples", got)
	}
}
