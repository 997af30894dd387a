package sanity

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Source is what carried a figure that failed: the value of the source
// label of meshperf_results_invalid_total.
type Source string

// The sources of figures.
const (
	// SourceRun is a test's Result (a ClientDone answer, in time or late).
	SourceRun Source = "run"
	// SourceProbe is a continuous probe's ProbeSummary.
	SourceProbe Source = "probe"
)

// Sources lists every Source, in a fixed order.
var Sources = []Source{SourceRun, SourceProbe}

// Counter counts the figures that failed, by source and reason. The zero
// value is ready; it is safe for concurrent use.
type Counter struct {
	n [2][4]atomic.Uint64
}

func index[T comparable](xs []T, x T) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// Add counts one failure of source for err's Reason (ReasonOf). A nil
// Counter counts nothing.
func (c *Counter) Add(source Source, err error) {
	if c == nil {
		return
	}
	s, r := index(Sources, source), index(Reasons, ReasonOf(err))
	if s < 0 || r < 0 {
		return
	}
	c.n[s][r].Add(1)
}

// Get is how many failures of source and reason were counted.
func (c *Counter) Get(source Source, reason Reason) uint64 {
	s, r := index(Sources, source), index(Reasons, reason)
	if c == nil || s < 0 || r < 0 {
		return 0
	}
	return c.n[s][r].Load()
}

// Limiter rate-limits warnings per node (per agent session) and message:
// at most one of each message about a node per Every, with the count of
// those it held back, so that one kind of warning repeated does not hide
// another about the same node. The zero value warns at most once a
// minute per node and message. It is safe for concurrent use and holds
// one entry per node and message that warned in the last Every.
type Limiter struct {
	// Every is the shortest time between two warnings about one node;
	// zero means one minute.
	Every time.Duration

	mu   sync.Mutex
	last map[string]*limited
}

type limited struct {
	at   time.Time
	held int
}

// Warn logs msg with args and the node at warning level unless msg about
// node was logged less than Every ago; then it only counts it, and the
// next msg logged about node says how many were held back
// ("suppressed").
func (l *Limiter) Warn(log *slog.Logger, node, msg string, args ...any) {
	every := l.Every
	if every <= 0 {
		every = time.Minute
	}
	now := time.Now()
	l.mu.Lock()
	if l.last == nil {
		l.last = map[string]*limited{}
	}
	key := node + "\x00" + msg
	e := l.last[key]
	if e != nil && now.Sub(e.at) < every {
		e.held++
		l.mu.Unlock()
		return
	}
	held := 0
	if e != nil {
		held = e.held
	}
	l.last[key] = &limited{at: now}
	if len(l.last) > 1024 { // prune the nodes quiet for a period
		for n, x := range l.last {
			if now.Sub(x.at) >= every && x.held == 0 {
				delete(l.last, n)
			}
		}
	}
	l.mu.Unlock()
	log.Warn(msg, append([]any{"node", node, "suppressed", held}, args...)...)
}
