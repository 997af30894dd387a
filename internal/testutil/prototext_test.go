package testutil

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestProtoText: nested and repeated fields on one line, in the message's
// order, strings quoted, no white space after a colon, whatever spacing
// this binary's prototext chose.
func TestProtoText(t *testing.T) {
	tests := []struct {
		name string
		m    *measurev1.RunSpec
		want string
	}{
		{"empty", &measurev1.RunSpec{}, ""},
		{"nested and repeated", &measurev1.RunSpec{
			Tests: []*measurev1.TestSpec{
				{Test: measurev1.Test_TEST_PING},
				{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: durationpb.New(time.Second)}}},
			},
			Label: "a b",
		}, `tests:{test:TEST_PING} tests:{test:TEST_QPERF_TCP_LAT qperf:{duration:{seconds:1}}} label:"a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ProtoText(tt.m); got != tt.want {
				t.Errorf("ProtoText = %q, want %q", got, tt.want)
			}
		})
	}
}
