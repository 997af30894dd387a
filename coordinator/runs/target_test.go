package runs

import (
	"strings"
	"testing"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestSanitizeTargetAddress is a rogue agent's target_address: the one
// field of its answer stored as it says. It must be an endpoint IP (no
// IPv4-mapped form that passes as IPv4, no zone, no control characters,
// no megabyte of text); anything else makes the result INVALID and is
// not stored.
func TestSanitizeTargetAddress(t *testing.T) {
	v4, none := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_UNSPECIFIED
	start := time.Now()
	tests := []struct {
		name       string
		planned    measurev1.IPFamily
		target     string
		wantStatus measurev1.Status
		wantTarget string
	}{
		{"plain IPv4", v4, "172.18.0.12", measurev1.Status_STATUS_TOOL_ERROR, "172.18.0.12"},
		{"none", none, "", measurev1.Status_STATUS_TOOL_ERROR, ""},
		{"v4-mapped passes as IPv4", v4, "::ffff:172.18.0.12", measurev1.Status_STATUS_INVALID, ""},
		{"zone", measurev1.IPFamily_IP_FAMILY_IPV6, "fd00:18::12%eth0", measurev1.Status_STATUS_INVALID, ""},
		{"escape sequence in a zone", v4, "fe80::1%\x1b[2J", measurev1.Status_STATUS_INVALID, ""},
		{"terminal escape, unplanned family", none, "\x1b]0;owned\a", measurev1.Status_STATUS_INVALID, ""},
		{"a megabyte", none, strings.Repeat("a", 1<<20), measurev1.Status_STATUS_INVALID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := &measurev1.PlannedTest{TestId: "t00001", SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_HOST_TO_HOST,
				Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, IpFamily: tt.planned}
			in := []*measurev1.Result{{Status: measurev1.Status_STATUS_TOOL_ERROR, Message: "x", TargetAddress: tt.target}}
			got := sanitize("r", pt, in, start)
			if len(got) != 1 || got[0].GetStatus() != tt.wantStatus || got[0].GetTargetAddress() != tt.wantTarget || len(got[0].GetMessage()) > 1024 {
				t.Errorf("sanitize: status %v target %.80q message %.200q; want status %v, target %q", got[0].GetStatus(), got[0].GetTargetAddress(),
					got[0].GetMessage(), tt.wantStatus, tt.wantTarget)
			}
		})
	}
}
