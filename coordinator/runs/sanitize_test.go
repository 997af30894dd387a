package runs

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestSanitizeAgentPayload pins that a result is stored with its planned
// spec (but for qperf's one message size, which must be a planned one),
// without unknown fields, and with a start time near its dispatch.
func TestSanitizeAgentPayload(t *testing.T) {
	start := time.Now()
	planned := &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT,
		Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{64}, Duration: durationpb.New(2 * time.Second)}}}
	pt := &measurev1.PlannedTest{TestId: "t00001", SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_POD_TO_POD, Spec: planned}
	agentSpec := func(sizes ...uint64) *measurev1.TestSpec {
		return &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT,
			Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: sizes, Duration: durationpb.New(time.Hour)}}}
	}
	manySizes := make([]uint64, 200000)
	for i := range manySizes {
		manySizes[i] = uint64(i + 1)
	}
	unknown := protowireField(1 << 20)
	result := func(spec *measurev1.TestSpec, f func(*measurev1.Result)) *measurev1.Result {
		r := &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: spec, StartTime: timestamppb.New(start.Add(time.Second)),
			Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{MsgSizeBytes: 64, LatencySeconds: 2e-5, DurationSeconds: 2}}}
		if f != nil {
			f(r)
		}
		return r
	}
	tests := []struct {
		name       string
		in         *measurev1.Result
		wantStatus measurev1.Status
		wantMsg    string
		wantStart  time.Time
	}{
		{"planned size kept, planned duration", result(agentSpec(64), nil), measurev1.Status_STATUS_OK, "", start.Add(time.Second)},
		{"200,000 sizes and an hour", result(agentSpec(manySizes...), func(r *measurev1.Result) { r.GetQperf().MsgSizeBytes = 1 << 62 }),
			measurev1.Status_STATUS_INVALID, "spec.qperf.msg_size_bytes [1 2 3 4] (200000 sizes) is not one of the planned sizes [64]", start.Add(time.Second)},
		{"a size not planned", result(agentSpec(65), nil), measurev1.Status_STATUS_INVALID, "not one of the planned sizes", start.Add(time.Second)},
		{"1 MiB of unknown fields", result(agentSpec(64), func(r *measurev1.Result) {
			r.ProtoReflect().SetUnknown(unknown)
			r.GetQperf().ProtoReflect().SetUnknown(unknown)
			r.StartTime.ProtoReflect().SetUnknown(unknown)
		}), measurev1.Status_STATUS_OK, "", start.Add(time.Second)},
		{"start 10 s before dispatch", result(agentSpec(64), func(r *measurev1.Result) { r.StartTime = timestamppb.New(start.Add(-10 * time.Second)) }),
			measurev1.Status_STATUS_OK, "", start},
		{"start 4 s before dispatch", result(agentSpec(64), func(r *measurev1.Result) { r.StartTime = timestamppb.New(start.Add(-4 * time.Second)) }),
			measurev1.Status_STATUS_OK, "", start.Add(-4 * time.Second)},
		{"start beyond the timeout", result(agentSpec(64), func(r *measurev1.Result) { r.StartTime = timestamppb.New(start.Add(30 * time.Minute)) }),
			measurev1.Status_STATUS_OK, "", start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sanitize("run-1", pt, []*measurev1.Result{tt.in}, start)
			if len(got) != 1 {
				t.Fatalf("%d results, want 1", len(got))
			}
			r := got[0]
			if r.GetStatus() != tt.wantStatus || !strings.Contains(r.GetMessage(), tt.wantMsg) {
				t.Errorf("status %v (%q), want %v with %q", r.GetStatus(), r.GetMessage(), tt.wantStatus, tt.wantMsg)
			}
			if !proto.Equal(r.GetSpec(), planned) {
				t.Errorf("stored spec %.300v, want the planned %v", r.GetSpec(), planned)
			}
			if n := proto.Size(r); n > 1024 {
				t.Errorf("stored result is %d bytes encoded, want the planned spec and the figures only", n)
			}
			if !r.GetStartTime().AsTime().Equal(tt.wantStart) {
				t.Errorf("start time %v, want %v", r.GetStartTime().AsTime(), tt.wantStart)
			}
		})
	}
}

// protowireField is an unknown field (number 999, bytes) of about n bytes.
func protowireField(n int) []byte {
	b := []byte{0xba, 0x3e} // field 999, wire type 2
	for v := uint64(n); ; v >>= 7 {
		if v < 0x80 {
			b = append(b, byte(v))
			break
		}
		b = append(b, byte(v)|0x80)
	}
	return append(b, make([]byte, n)...)
}
