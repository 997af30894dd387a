package probe

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// expiry is when an echo in flight times out.
type expiry struct {
	at  time.Time // monotonic
	pg  *pinger
	seq uint16
	w   *waiter
}

// expiries are the echoes in flight, earliest timeout first (a heap: a
// settings change may shorten the timeout).
type expiries []expiry

func (e expiries) Len() int           { return len(e) }
func (e expiries) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e expiries) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }

// Push is heap.Interface's; use push.
func (e *expiries) Push(x any) { *e = append(*e, x.(expiry)) }

// Pop is heap.Interface's; use pop.
func (e *expiries) Pop() any {
	old := *e
	x := old[len(old)-1]
	old[len(old)-1] = expiry{} // no reference to the waiter
	*e = old[:len(old)-1]
	return x
}

func (e *expiries) push(x expiry) { heap.Push(e, x) }
func (e *expiries) pop() expiry   { return heap.Pop(e).(expiry) }

// next returns the earliest timeout.
func (e expiries) next() (time.Time, bool) {
	if len(e) == 0 {
		return time.Time{}, false
	}
	return e[0].at, true
}

// tcpJob is one TCP probe for a worker.
type tcpJob struct {
	t       target
	due     time.Time
	timeout time.Duration
}

// tcpWorkerIdle is how long a TCP worker waits for its next probe before
// it ends.
const tcpWorkerIdle = time.Minute

// tcp runs j on an idle TCP worker, or on a new one when none is waiting.
// Workers are bounded as the probes in flight are (max_in_flight): a
// worker is started only for a probe that the budget admitted and no
// idle worker took. A worker keeps its grown stack from probe to probe,
// where a goroutine per probe would grow a new one each time.
func (l *loop) tcp(j tcpJob) {
	select {
	case l.jobs <- j:
		return
	default:
	}
	l.probes.Go(func() {
		idle := time.NewTimer(tcpWorkerIdle)
		defer idle.Stop()
		for {
			d := l.dialers[j.t.net]
			rtt, status, msg := tcpProbe(d, j.t.dst, j.t.port, time.Now().Add(j.timeout), &l.live)
			l.box.put(result{key: j.t.key, due: j.due, rtt: rtt, status: status, msg: msg})
			idle.Reset(tcpWorkerIdle)
			select {
			case j = <-l.jobs:
			case <-idle.C:
				return
			case <-l.ctx.Done():
				return
			}
		}
	})
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
