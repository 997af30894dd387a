package protocol

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// Bounds on the heartbeats a coordinator may ask of an agent: a shorter
// interval floods the stream with heartbeats, and a timeout under
// MinHeartbeatTimeouts intervals drops the session for one late
// heartbeat.
const (
	// MinHeartbeatInterval is the shortest heartbeat interval an agent takes.
	MinHeartbeatInterval = 10 * time.Millisecond
	// MinHeartbeatTimeouts: a timeout must be at least this many intervals.
	MinHeartbeatTimeouts = 2
)

// ErrBadHeartbeat is wrapped by the errors for heartbeats an agent cannot
// honor (Heartbeats.Check, ProposedHeartbeats).
var ErrBadHeartbeat = errors.New("coordinator asked for unusable heartbeats")

// Heartbeats are a session's heartbeat interval (how often each side sends
// a Heartbeat) and timeout (how long a side waits for any message), as the
// coordinator sets them in Registered and may change them with a Heartbeat
// that carries both.
type Heartbeats struct {
	// Interval is how often each side sends a Heartbeat.
	Interval time.Duration
	// Timeout is how long a side waits for any message before it drops
	// the session.
	Timeout time.Duration
}

// Check refuses heartbeats an agent cannot honor: an interval under
// MinHeartbeatInterval, or a timeout under MinHeartbeatTimeouts intervals.
// The error wraps ErrBadHeartbeat and names the values.
func (h Heartbeats) Check() error {
	switch {
	case h.Interval < MinHeartbeatInterval:
		return fmt.Errorf("%w: heartbeat interval %v is below %v", ErrBadHeartbeat, h.Interval, MinHeartbeatInterval)
	case h.Timeout/MinHeartbeatTimeouts < h.Interval: // timeout < 2 x interval, without overflow
		return fmt.Errorf("%w: heartbeat timeout %v is below %d x the interval %v", ErrBadHeartbeat, h.Timeout, MinHeartbeatTimeouts, h.Interval)
	}
	return nil
}

// ProposedHeartbeats reads the heartbeats a coordinator's Heartbeat
// proposes: ok is false when it proposes none (neither interval nor
// timeout set) or ones an agent cannot honor (err, wrapping
// ErrBadHeartbeat, says why: one field without the other, or Check's
// refusal). An agent that takes a proposal answers it at once with
// HeartbeatRequest.
func ProposedHeartbeats(hb *agentv1.Heartbeat) (h Heartbeats, ok bool, err error) {
	iv, to := hb.GetInterval(), hb.GetTimeout()
	switch {
	case iv == nil && to == nil:
		return Heartbeats{}, false, nil
	case iv == nil || to == nil:
		return Heartbeats{}, false, fmt.Errorf("%w: heartbeat.interval %v and heartbeat.timeout %v must be set together", ErrBadHeartbeat, iv.AsDuration(), to.AsDuration())
	}
	h = Heartbeats{iv.AsDuration(), to.AsDuration()}
	if err := h.Check(); err != nil {
		return Heartbeats{}, false, err
	}
	return h, true, nil
}

// HeartbeatRequest is an agent's heartbeat, sent now: with taken nil, a
// plain one; otherwise the answer to the proposal the agent took, carrying
// its interval and timeout (the coordinator changes its own heartbeats once
// it has this answer).
func HeartbeatRequest(taken *Heartbeats) *agentv1.ConnectRequest {
	hb := &agentv1.Heartbeat{SendTime: timestamppb.Now()}
	if taken != nil {
		hb.Interval, hb.Timeout = durationpb.New(taken.Interval), durationpb.New(taken.Timeout)
	}
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: hb}}
}
