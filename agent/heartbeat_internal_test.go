package agent

import (
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// FuzzProposedHeartbeats: whatever a coordinator's Heartbeat carries,
// proposedHeartbeats takes only values checkHeartbeat accepts, and both
// fields or neither.
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
		p, ok, err := proposedHeartbeats(hb)
		switch {
		case ok && err != nil:
			t.Fatalf("taken with an error: %v", err)
		case !hasI && !hasT && (ok || err != nil):
			t.Fatalf("no proposal: ok %v, err %v", ok, err)
		case hasI != hasT && (ok || err == nil):
			t.Fatalf("one field without the other: ok %v, err %v", ok, err)
		case ok && checkHeartbeat(p.interval, p.timeout) != nil:
			t.Fatalf("took %v/%v, which checkHeartbeat refuses", p.interval, p.timeout)
		case ok && (p.interval < minHeartbeatInterval || p.timeout < 2*p.interval):
			t.Fatalf("took %v/%v", p.interval, p.timeout)
		}
	})
}
