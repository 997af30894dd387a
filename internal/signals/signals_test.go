package signals

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// While a command claims SIGINT, an interrupt reaches it and leaves the
// context alone; once released, an interrupt cancels the context.
func TestClaim(t *testing.T) {
	ctx, stop := Context(context.Background())
	defer stop()
	bound, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	intr, release := Claim(ctx)
	if intr == nil {
		t.Fatal("Claim under Context gave no channel")
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
	if cause := context.Cause(ctx); cause == nil || cause.Error() != "interrupt signal received" {
		t.Errorf("context.Cause = %v, want the signal named", cause)
	}
	if c, _ := Claim(context.Background()); c != nil {
		t.Error("Claim without Context gave a channel")
	}
}

// Execute hands the args to the tree and returns its error; the tree's
// context is canceled once Execute returns (the signals released).
func TestExecute(t *testing.T) {
	var seen []string
	var treeCtx context.Context
	cmd := &cobra.Command{
		Use:  "x",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			seen, treeCtx = args, cmd.Context()
			return errors.New("refused")
		},
	}
	err := Execute(context.Background(), cmd, []string{"a", "b"})
	if err == nil || err.Error() != "refused" {
		t.Fatalf("Execute = %v, want the command's error", err)
	}
	if len(seen) != 2 || seen[0] != "a" || seen[1] != "b" {
		t.Errorf("args = %q, want [a b]", seen)
	}
	if treeCtx == nil || treeCtx.Err() == nil {
		t.Error("the tree's context outlived Execute")
	}
}
