package agent

import (
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The wait for a ClusterIP must not connect to a one-off iperf3 server: it
// would take the probe for its one test and refuse the real client.
func TestProbeSafe(t *testing.T) {
	tests := []struct {
		test measurev1.Test
		want bool
	}{
		{measurev1.Test_TEST_IPERF3_TCP, false},
		{measurev1.Test_TEST_IPERF3_UDP, false},
		{measurev1.Test_TEST_QPERF_TCP_BW, true},
		{measurev1.Test_TEST_QPERF_TCP_LAT, true},
		{measurev1.Test_TEST_HTTP, true},
	}
	for _, tt := range tests {
		if got := probeSafe(tt.test); got != tt.want {
			t.Errorf("probeSafe(%v) = %v, want %v", tt.test, got, tt.want)
		}
	}
}
