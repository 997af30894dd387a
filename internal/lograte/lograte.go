// Package lograte owns the bound on the warnings that outsiders can
// cause at will: refused agent registrations, API calls, web requests
// and scrapes without the right token or certificate. A token bucket
// lets a burst through, then one warning an interval; the next warning
// logged counts those suppressed, so that a flood of made-up tokens costs
// a log line a second, not one a request, and is still seen.
package lograte

import (
	"log/slog"
	"sync"
	"time"
)

// Interval and Burst are the bucket's rate: past Burst warnings, at most
// one each Interval.
const (
	Interval = time.Second
	Burst    = 10
)

// Bucket rate-limits one kind of warning. The zero value is ready: full
// at its first use. It is safe for concurrent use.
type Bucket struct {
	mu         sync.Mutex
	started    bool
	tokens     int       // warnings that may be logged now
	refilled   time.Time // when tokens was last refilled
	suppressed int       // warnings not logged since the last one logged
}

// Allow reports whether a warning at now is logged and, if it is, how
// many were suppressed before it.
func (b *Bucket) Allow(now time.Time) (ok bool, suppressed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started, b.tokens, b.refilled = true, Burst, now
	}
	if n := int(now.Sub(b.refilled) / Interval); n > 0 {
		b.tokens = min(Burst, b.tokens+n)
		b.refilled = b.refilled.Add(time.Duration(n) * Interval)
	}
	if b.tokens == 0 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

// Warn logs msg with args and "suppressed" (the count Allow gave) at
// warning level on log, if Allow(now) lets it.
func (b *Bucket) Warn(log *slog.Logger, now time.Time, msg string, args ...any) {
	ok, suppressed := b.Allow(now)
	if !ok {
		return
	}
	log.Warn(msg, append(args, "suppressed", suppressed)...)
}
