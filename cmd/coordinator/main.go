// Command coordinator is meshperf's coordinator: `coordinator serve` runs
// the daemon; `trigger`, `results` and `agents` talk to it. See
// coordinator/cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/meshperf/meshperf/coordinator/cli"
)

// ExitTrouble is the exit status of an error (a bad flag, no coordinator, a
// refused call), kept apart from the verdicts' 1 (a failed pair-path, a
// fault found, a cell worse): a script can tell "the network is bad" from
// "the question could not be answered".
const ExitTrouble = 2

// init gives gRPC, process-wide (its proto codec takes no other), a pool
// of message buffers with its default tiers up to 32 kB and a buffer of
// the message's own size above that. gRPC's default pool rounds every
// message over 32 kB up to a 1 MB buffer, and a full probe plan of 5,000
// peers (some 360 kB), queued for each agent of a join wave, then costs
// 2.8 times its size. It is the command's, not the coordinator package's:
// a library should not change what its importers' gRPC does.
func init() {
	pool, err := mem.NewBinaryTieredBufferPool(8, 12, 14, 15)
	if err != nil {
		panic(fmt.Sprintf("gRPC buffer pool: %v", err)) // constant tiers: cannot happen
	}
	experimental.SetDefaultBufferPool(pool)
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code) // the command already said why: its verdict stays the last line
		}
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(ExitTrouble)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := cli.NewCommand(stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
