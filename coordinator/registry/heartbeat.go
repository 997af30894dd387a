package registry

import (
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// heartbeatParams are a session's heartbeat interval (how often each side
// sends a Heartbeat) and timeout (how long a side waits for any message);
// never modified once stored.
type heartbeatParams struct {
	interval, timeout time.Duration
}

// retune reports whether the session's heartbeats p are far enough from
// want (Registry.heartbeats, for the fleet as it is now) to propose want
// to the agent: a fifth shorter or a quarter longer. Sessions that
// registered early in a join wave got the small fleet's 1 s; without a
// change they would keep it, and a wave of 5,000 agents would send about
// 1,650 heartbeats a second each way instead of the budget's 500.
func (p heartbeatParams) retune(want *heartbeatParams) bool {
	return 5*want.interval < 4*p.interval || 4*want.interval > 5*p.interval
}

// takenBy reports whether hb, an agent's Heartbeat, takes the proposal p
// (nil: none outstanding): it carries p's interval and timeout.
func (p *heartbeatParams) takenBy(hb *agentv1.Heartbeat) bool {
	return p != nil && hb.GetInterval().AsDuration() == p.interval && hb.GetTimeout().AsDuration() == p.timeout
}

// heartbeat returns the session's heartbeat parameters (zero before they
// are set).
func (s *session) heartbeat() heartbeatParams {
	if p := s.hb.Load(); p != nil {
		return *p
	}
	return heartbeatParams{}
}
