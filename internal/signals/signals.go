// Package signals owns how a meshperf command's process takes SIGINT and
// SIGTERM: each cancels the context its cobra command tree runs with,
// except that a command may claim SIGINT for a while (`coordinator
// trigger` asks, on Ctrl-C while it watches a run, whether to cancel the
// run). The three commands (cmd/agent, cmd/coordinator, cmd/meshlab) run
// their trees with Execute.
package signals

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// Execute runs cmd with args (os.Args[1:] in a main) under a context
// that parent's end, SIGTERM and an unclaimed SIGINT cancel (Context),
// and returns cmd's error; the signals are released before it returns.
func Execute(parent context.Context, cmd *cobra.Command, args []string) error {
	ctx, stop := Context(parent)
	defer stop()
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// interrupts routes SIGINT to the command that claimed it.
type interrupts struct {
	mu    sync.Mutex
	claim chan struct{} // nil: nobody claimed SIGINT
}

type interruptsKey struct{}

// Context returns a context for a command tree's ExecuteContext that
// SIGTERM cancels, and SIGINT too unless a command claimed it (Claim),
// with the signal as its cause (context.Cause: "interrupt signal
// received"); stop releases the signals and cancels the context.
func Context(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
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
				cancel(fmt.Errorf("%v signal received", s))
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		cancel(nil)
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

// Claim takes SIGINT away from ctx's cancel (Context) until release;
// each interrupt then arrives on the channel (one pending at most).
// Without Context (tests, embedders) the channel is nil: an interrupt
// cancels ctx as before.
func Claim(ctx context.Context) (c <-chan struct{}, release func()) {
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
