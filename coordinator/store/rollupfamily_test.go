package store

import (
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The IPv4 and IPv6 rollups of one cell and hour get distinct keys, and an
// IPv4 rollup's key is the one of before families.
func TestRollupParamsFamily(t *testing.T) {
	spec := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: 5}}}
	before := paramsText(spec)
	tests := []struct {
		family measurev1.IPFamily
		want   string
	}{
		{measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, before},
		{measurev1.IPFamily_IP_FAMILY_IPV4, before},
		{measurev1.IPFamily_IP_FAMILY_IPV6, before + "\x00ipv6"},
	}
	for _, tt := range tests {
		if got := rollupParams(&measurev1.Rollup{Spec: spec, IpFamily: tt.family}); got != tt.want {
			t.Errorf("rollupParams(%v) = %q, want %q", tt.family, got, tt.want)
		}
	}
}
