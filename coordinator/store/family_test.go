package store

import (
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestFilterFamily(t *testing.T) {
	v4, v6, unset := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6, measurev1.IPFamily_IP_FAMILY_UNSPECIFIED
	tests := []struct {
		filter, result measurev1.IPFamily
		want           bool
	}{
		{unset, v6, true}, {unset, unset, true},
		{v4, unset, true}, // stored before families: IPv4
		{v4, v4, true}, {v4, v6, false},
		{v6, v6, true}, {v6, unset, false}, {v6, v4, false},
	}
	for _, tt := range tests {
		r := &measurev1.Result{IpFamily: tt.result, StartTime: timestamppb.Now()}
		if got := (Filter{IPFamily: tt.filter}).match(r); got != tt.want {
			t.Errorf("Filter{IPFamily: %v}.match(result of %v) = %v, want %v", tt.filter, tt.result, got, tt.want)
		}
	}
	if (Filter{}).scope(1) == (Filter{IPFamily: v6}).scope(1) {
		t.Error("a family filter has the scope of no filter: a page token would carry over")
	}
}
