// Package tick runs the coordinator's periodic work: a function called
// after each delay of a schedule, on one timer, until its context ends;
// the waits for a condition (Until) of the lab, the simulated fleet and
// the tests (testutil.Poll); and a pause that the context cuts (Sleep).
package tick

import (
	"context"
	"fmt"
	"time"
)

// Until calls cond at once and then every interval until it returns "",
// and then returns nil. cond returns "" when what the caller waits for
// holds, otherwise why not ("2 of 3 agents connected"). If ctx ends
// first, Until returns an error holding cond's last answer and wrapping
// ctx.Err(): the caller bounds the wait with ctx. interval must be
// positive; Until panics otherwise, as time.NewTicker does.
func Until(ctx context.Context, interval time.Duration, cond func() string) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		why := cond()
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", why, ctx.Err())
		case <-t.C:
		}
	}
}

// Every calls fn every d (the first call after d, not at once) until ctx
// ends, and then returns: Repeat with the fixed delay d. d must be
// positive; Every panics otherwise, as time.NewTicker does.
func Every(ctx context.Context, d time.Duration, fn func()) {
	if d <= 0 {
		panic("tick: non-positive interval for Every")
	}
	Repeat(ctx, func() time.Duration { return d }, fn)
}

// Repeat calls fn after each delay that next returns until ctx ends, and
// then returns. next is asked before the first call and again after each
// call returns, so the delay runs from the end of one call to the start of
// the next: calls never overlap, and a caller can move each one (the
// monitor's jittered plans). fn runs in the caller's goroutine; a delay of
// zero or less calls it at once. Once ctx has ended fn is not called
// again, even when its timer fired at the same moment.
func Repeat(ctx context.Context, next func() time.Duration, fn func()) {
	t := time.NewTimer(next())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		fn()
		t.Reset(next())
	}
}

// Sleep waits d, or until ctx ends; it returns ctx.Err() if ctx ended
// first, else nil. A d of zero or less returns at once (nil unless ctx
// has already ended).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
