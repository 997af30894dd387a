package testutil

import (
	"context"
	"sync"
	"testing"
)

// Run runs run on a goroutine of its own with a child of ctx, until the
// test ends or the caller calls the returned stop: stop (registered with
// t.Cleanup too) cancels that context, waits for run to return and fails
// t (Errorf, naming what) if run returned an error; it may be called more
// than once. With ready not nil, Run first waits until ready is closed
// (what run closes once it serves) and fails t (Fatalf, naming what) if
// run returns before.
func Run(t testing.TB, ctx context.Context, what string, ready <-chan struct{}, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var err error
	go func() { // owner: stop
		defer close(done)
		err = run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		})
	}
	t.Cleanup(stop)
	if ready != nil {
		select {
		case <-ready:
		case <-done:
			once.Do(cancel) // reported here, not again by stop
			t.Fatalf("%s: %v", what, err)
		}
	}
	return stop
}
