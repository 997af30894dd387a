package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/tick"
)

// Poll calls cond at once and then every interval until it returns "",
// and then returns nil. cond returns "" when what the caller waits for
// holds, otherwise why not. If ctx ends first, Poll returns an error
// holding cond's last answer and wrapping ctx.Err(). A non-positive
// interval is taken as 10 ms. It is tick.Until with that default.
func Poll(ctx context.Context, interval time.Duration, cond func() string) error {
	if interval <= 0 {
		interval = 10 * time.Millisecond
	}
	return tick.Until(ctx, interval, cond)
}

// Within reports whether cond holds within timeout, calling it at once
// and then every interval (10 ms if interval is not positive). The
// timeout only bounds the wait; it asserts no timing.
func Within(timeout, interval time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return PollContext(ctx, interval, cond) == nil
}

// PollContext is Poll for a cond without a reason: it returns nil once
// cond holds and ctx.Err() if ctx ends first.
func PollContext(ctx context.Context, interval time.Duration, cond func() bool) error {
	err := Poll(ctx, interval, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
	if err != nil {
		return ctx.Err()
	}
	return nil
}

// Eventually fails t (Fatalf, naming what) unless cond holds within
// timeout, calling it at once and then every interval (10 ms if interval
// is not positive). The timeout only turns a hang into a failure.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(timeout, interval, cond) {
		t.Fatalf("gave up waiting for %s (%v)", what, timeout)
	}
}

// Expect is Eventually that lets the test go on: it marks t failed
// (Errorf, naming what) unless cond holds within timeout, and returns
// whether it did, so that the caller can clean up after a failure.
func Expect(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) bool {
	t.Helper()
	if !Within(timeout, interval, cond) {
		t.Errorf("gave up waiting for %s (%v)", what, timeout)
		return false
	}
	return true
}

// EventuallyCtx fails t (Fatalf, naming what and ctx's error) unless cond
// holds before ctx ends; cond is called at once and then every interval
// (10 ms if interval is not positive). The context's deadline only turns
// a hang into a failure.
func EventuallyCtx(t testing.TB, ctx context.Context, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := PollContext(ctx, interval, cond); err != nil {
		t.Fatalf("gave up waiting for %s: %v", what, err)
	}
}

// WaitFor fails t (Fatalf, naming what, limit and cond's last answer)
// unless cond returns "" within limit and before ctx ends; cond is called
// at once and then every interval (10 ms if interval is not positive)
// and returns why not yet otherwise. The limit only turns a hang into a
// failure.
func WaitFor(t testing.TB, ctx context.Context, limit, interval time.Duration, what string, cond func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := Poll(ctx, interval, cond); err != nil {
		t.Fatalf("gave up waiting %v for %s: %v", limit, what, err)
	}
}
