package protocol

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

func TestHeartbeatsCheck(t *testing.T) {
	tests := []struct {
		name    string
		h       Heartbeats
		wantErr bool
	}{
		{"registry default", Heartbeats{time.Second, 5 * time.Second}, false},
		{"shortest interval, timeout two intervals", Heartbeats{MinHeartbeatInterval, 2 * MinHeartbeatInterval}, false},
		{"interval under the floor", Heartbeats{MinHeartbeatInterval - 1, time.Second}, true},
		{"zero interval", Heartbeats{0, time.Second}, true},
		{"timeout just under two intervals", Heartbeats{time.Second, 2*time.Second - 1}, true},
		{"huge timeout does not overflow", Heartbeats{time.Second, time.Duration(1<<63 - 1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Check()
			if (err != nil) != tt.wantErr || err != nil && !errors.Is(err, ErrBadHeartbeat) {
				t.Fatalf("Check(%v) = %v, want error %v (wrapping ErrBadHeartbeat)", tt.h, err, tt.wantErr)
			}
		})
	}
}

func TestHeartbeatRequest(t *testing.T) {
	plain := HeartbeatRequest(nil).GetHeartbeat()
	if plain.GetSendTime() == nil || plain.GetInterval() != nil || plain.GetTimeout() != nil {
		t.Errorf("plain heartbeat = %v, want a send time only", plain)
	}
	taken := Heartbeats{3 * time.Second, 15 * time.Second}
	answer := HeartbeatRequest(&taken).GetHeartbeat()
	if answer.GetSendTime() == nil || answer.GetInterval().AsDuration() != taken.Interval || answer.GetTimeout().AsDuration() != taken.Timeout {
		t.Errorf("answer = %v, want send time, interval %v, timeout %v", answer, taken.Interval, taken.Timeout)
	}
}

// FuzzProposedHeartbeats: whatever a coordinator's Heartbeat carries,
// ProposedHeartbeats takes only values Check accepts, and both fields or
// neither.
func FuzzProposedHeartbeats(f *testing.F) {
	f.Add(int64(0), int32(0), int64(0), int32(0), true, true)
	f.Add(int64(1), int32(0), int64(3), int32(0), true, true)
	f.Add(int64(0), int32(5_000_000), int64(1), int32(0), true, true)
	f.Add(int64(-1), int32(0), int64(3), int32(0), true, true)
	f.Add(int64(1), int32(0), int64(0), int32(0), true, false)
	f.Add(int64(0), int32(-1), int64(0), int32(999_999_999), true, true)
	f.Fuzz(func(t *testing.T, is int64, in int32, ts int64, tn int32, hasI, hasT bool) {
		hb := &agentv1.Heartbeat{}
		if hasI {
			hb.Interval = &durationpb.Duration{Seconds: is, Nanos: in}
		}
		if hasT {
			hb.Timeout = &durationpb.Duration{Seconds: ts, Nanos: tn}
		}
		h, ok, err := ProposedHeartbeats(hb)
		switch {
		case ok && err != nil:
			t.Fatalf("taken with an error: %v", err)
		case !hasI && !hasT && (ok || err != nil):
			t.Fatalf("no proposal: ok %v, err %v", ok, err)
		case hasI != hasT && (ok || err == nil):
			t.Fatalf("one field without the other: ok %v, err %v", ok, err)
		case ok && h.Check() != nil:
			t.Fatalf("took %v, which Check refuses", h)
		case ok && (h.Interval < MinHeartbeatInterval || h.Timeout < 2*h.Interval):
			t.Fatalf("took %v", h)
		}
	})
}
