package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// This file routes the process's interrupts: `trigger` takes Ctrl-C while
// it watches a run (it asks whether to cancel the run); otherwise an
// interrupt, like SIGTERM, cancels the commands' context.

// interrupts routes SIGINT to the command that claimed it.
type interrupts struct {
	mu    sync.Mutex
	claim chan struct{} // nil: nobody claimed SIGINT
}

type interruptsKey struct{}

// WithSignals returns a context for NewCommand's ExecuteContext that
// SIGTERM cancels, and SIGINT too unless a command claimed it (`trigger`
// while it watches, see --on-interrupt); stop releases the signals and
// cancels the context.
func WithSignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	r := &interrupts{}
	ctx = context.WithValue(ctx, interruptsKey{}, r)
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { // owner: stop, which waits for it
		defer close(done)
		for {
			select {
			case s := <-sig:
				if s == os.Interrupt && r.deliver() {
					continue
				}
				cancel()
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		cancel()
		<-done
	}
}

// deliver hands an interrupt to the claimant without blocking; false
// means nobody claimed it.
func (r *interrupts) deliver() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claim == nil {
		return false
	}
	select {
	case r.claim <- struct{}{}:
	default: // one pending is enough to act on
	}
	return true
}

// claimInterrupts takes SIGINT away from ctx's cancel (WithSignals) until
// release; each interrupt then arrives on the channel. Without
// WithSignals (tests, embedders) the channel is nil: an interrupt cancels
// ctx as before.
func claimInterrupts(ctx context.Context) (c <-chan struct{}, release func()) {
	r, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if r == nil {
		return nil, func() {}
	}
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.claim = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		if r.claim == ch {
			r.claim = nil
		}
		r.mu.Unlock()
	}
}
