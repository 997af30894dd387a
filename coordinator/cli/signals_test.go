package cli

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// While trigger claims SIGINT, an interrupt reaches it and leaves the
// context alone; once released, an interrupt cancels the context.
func TestWithSignals(t *testing.T) {
	ctx, stop := WithSignals(context.Background())
	defer stop()
	bound, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	intr, release := claimInterrupts(ctx)
	if intr == nil {
		t.Fatal("claimInterrupts under WithSignals gave no channel")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-intr:
	case <-bound.Done():
		t.Fatal("the claimed interrupt never arrived")
	}
	if ctx.Err() != nil {
		t.Fatal("a claimed interrupt canceled the context")
	}
	release()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-bound.Done():
		t.Fatal("an interrupt nobody claimed did not cancel the context")
	}
	if c, _ := claimInterrupts(context.Background()); c != nil {
		t.Error("claimInterrupts without WithSignals gave a channel")
	}
}
