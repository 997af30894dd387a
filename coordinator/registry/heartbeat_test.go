package registry

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// TestRetune: a change is proposed only when the fleet's heartbeats are a
// fifth shorter or a quarter longer than the session's.
func TestRetune(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		cur, want time.Duration
		retune    bool
	}{
		{s, s, false},
		{s, 1240 * time.Millisecond, false},
		{s, 1260 * time.Millisecond, true},
		{s, 10 * s, true},
		{10 * s, 8100 * time.Millisecond, false},
		{10 * s, 7900 * time.Millisecond, true},
		{10 * s, s, true},
	} {
		p := heartbeatParams{interval: c.cur, timeout: 3 * c.cur}
		if got := p.retune(&heartbeatParams{interval: c.want, timeout: 3 * c.want}); got != c.retune {
			t.Errorf("retune from %v to %v = %v, want %v", c.cur, c.want, got, c.retune)
		}
	}
}

// TestHeartbeatsFollowTheFleet: a session that registered first, at the
// small fleet's interval, is proposed the grown fleet's heartbeats; an
// agent that answers with them has the session switch to them (and no
// further proposal), one that ignores them or answers with other values
// keeps the old ones and is proposed them again.
func TestHeartbeatsFollowTheFleet(t *testing.T) {
	const base = 20 * time.Millisecond // HeartbeatInterval; MaxHeartbeatRate 100: 10 ms a known node
	for _, c := range []struct {
		name   string
		answer func(p *agentv1.Heartbeat) *agentv1.Heartbeat // nil: no answer
		taken  bool
	}{
		{"taken", func(p *agentv1.Heartbeat) *agentv1.Heartbeat { return p }, true},
		{"ignored", nil, false},
		{"other interval", func(p *agentv1.Heartbeat) *agentv1.Heartbeat {
			return &agentv1.Heartbeat{Interval: durationpb.New(p.GetInterval().AsDuration() * 100), Timeout: p.GetTimeout()}
		}, false},
		{"other timeout", func(p *agentv1.Heartbeat) *agentv1.Heartbeat {
			return &agentv1.Heartbeat{Interval: p.GetInterval(), Timeout: durationpb.New(p.GetTimeout().AsDuration() / 2)}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := New(t.Context(), Config{Recorder: memRecorder{}, HeartbeatInterval: base, HeartbeatTimeout: time.Hour, MaxHeartbeatRate: 100})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Shutdown)
			first, reg := connect(t, r, agentReg("n1", "10.0.0.1", ""))
			if got := reg.GetHeartbeatInterval().AsDuration(); got != base {
				t.Fatalf("first agent's heartbeat_interval %v, want %v", got, base)
			}
			for i := 2; i <= 5; i++ {
				connect(t, r, agentReg(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d", i), ""))
			}
			want := r.heartbeats() // 5 known nodes: 50 ms
			if want.interval != 50*time.Millisecond {
				t.Fatalf("the fleet's heartbeats %v, want 50ms", want.interval)
			}
			proposal := func() *agentv1.Heartbeat {
				return first.next(t, "a Heartbeat proposing new heartbeats", func(m *agentv1.ConnectResponse) bool {
					return m.GetHeartbeat().GetInterval() != nil
				}).GetHeartbeat()
			}
			p := proposal()
			if p.GetInterval().AsDuration() != want.interval || p.GetTimeout().AsDuration() != want.timeout {
				t.Fatalf("proposed %v/%v, want %v/%v", p.GetInterval().AsDuration(), p.GetTimeout().AsDuration(), want.interval, want.timeout)
			}
			if c.answer != nil {
				first.send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: c.answer(p)}})
			}
			r.mu.Lock()
			s := r.sessions["n1"]
			r.mu.Unlock()
			deadline := time.Now().Add(waitBound)
			for c.taken && s.heartbeat().interval != want.interval && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if c.taken {
				first.next(t, "a plain Heartbeat once taken", func(m *agentv1.ConnectResponse) bool {
					return m.GetHeartbeat() != nil && m.GetHeartbeat().GetInterval() == nil
				})
			} else {
				proposal() // proposed again: the answer did not take it
			}
			if got := s.heartbeat(); c.taken != (got == *want) {
				t.Errorf("session's heartbeats %v/%v after the answer; taken %v, want %v", got.interval, got.timeout, got == *want, c.taken)
			}
		})
	}
}
