package probe

import (
	"sync"
	"sync/atomic"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// expiry is when a probe in flight times out: an echo (pg, seq, w) or a
// TCP probe (tcp).
type expiry struct {
	at  time.Time // monotonic
	pg  *pinger
	seq uint16
	w   *waiter
	tcp uint32
}

// expiries are the echoes and TCP probes in flight, earliest timeout
// first: a binary heap (a settings change may shorten the timeout), kept
// by hand rather than with container/heap, whose any-typed Push and Pop
// would allocate for every probe.
type expiries []expiry

func (e *expiries) push(x expiry) {
	h := append(*e, x)
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h[i].at.Before(h[up].at) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
	*e = h
}

func (e *expiries) pop() expiry {
	h := *e
	x := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = expiry{} // no reference to the waiter
	h = h[:n]
	for i := 0; ; {
		least := i
		if l := 2*i + 1; l < n && h[l].at.Before(h[least].at) {
			least = l
		}
		if r := 2*i + 2; r < n && h[r].at.Before(h[least].at) {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*e = h
	return x
}

// next returns the earliest timeout.
func (e expiries) next() (time.Time, bool) {
	if len(e) == 0 {
		return time.Time{}, false
	}
	return e[0].at, true
}

// mailbox passes finished probes to the loop, mostly without waking it:
// the loop takes them at its next step, which comes at the next probe due
// (or timeout, or period end). A failure wakes it (it may end the period
// early: the report must not wait), and so does any result while the loop
// is eager (a period waits for its last probes). put never blocks: the
// results held are bounded by the probes in flight.
type mailbox struct {
	now   func() time.Time // stamps each result's at
	eager atomic.Bool
	wake  chan struct{} // capacity 1
	ring  func()        // if not nil, called with each wake (the prober's alarm)

	mu sync.Mutex
	rs []result
}

func newMailbox(now func() time.Time) *mailbox {
	return &mailbox{now: now, wake: make(chan struct{}, 1)}
}

// put adds r, finished now, and wakes the loop if r failed or the loop is
// eager.
func (m *mailbox) put(r result) {
	r.at = m.now()
	m.mu.Lock()
	m.rs = append(m.rs, r)
	m.mu.Unlock()
	if r.status != measurev1.Status_STATUS_OK || m.eager.Load() {
		select {
		case m.wake <- struct{}{}:
		default:
		}
		if m.ring != nil {
			m.ring()
		}
	}
}

// take appends the results held to buf and forgets them.
func (m *mailbox) take(buf []result) []result {
	m.mu.Lock()
	defer m.mu.Unlock()
	buf = append(buf, m.rs...)
	clear(m.rs)
	m.rs = m.rs[:0]
	return buf
}

// pending reports whether a result is held.
func (m *mailbox) pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rs) > 0
}
