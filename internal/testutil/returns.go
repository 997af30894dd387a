package testutil

import (
	"context"
	"testing"
)

// Returns calls f on a goroutine of its own and returns its answer, or
// fails t (Fatalf, naming what and ctx's error) if f has not returned by
// the time ctx ends: for a call that must not block on what the test
// holds (a store write, a lock). The context's deadline only turns a hang
// into a failure; it asserts no timing. A blocked f keeps its goroutine
// until it returns; a t whose Fatalf returns gets T's zero value.
func Returns[T any](t testing.TB, ctx context.Context, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)     // room for the answer: the goroutine never blocks on it
	go func() { ch <- f() }() // owner: f, which the caller's test unblocks
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("%s did not return: %v", what, ctx.Err())
		var zero T
		return zero
	}
}
