// Package tick runs the coordinator's periodic work: a function called
// every interval, on one ticker, until its context ends.
package tick

import (
	"context"
	"time"
)

// Every calls fn every d (the first call after d, not at once) until ctx
// ends, and then returns. fn runs in the caller's goroutine, one call at
// a time; a call that takes longer than d delays the next rather than
// overlapping it. d must be positive (time.NewTicker panics otherwise).
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}
