// Command coordinator is meshperf's coordinator: `coordinator serve` runs
// the daemon; `trigger`, `results` and `agents` talk to it. See
// coordinator/cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/meshperf/meshperf/coordinator/cli"
	"github.com/meshperf/meshperf/internal/grpcbuf"
	"github.com/meshperf/meshperf/internal/signals"
)

// ExitTrouble is the exit status of an error (a bad flag, no coordinator, a
// refused call), kept apart from the verdicts' 1 (a failed pair-path, a
// fault found, a cell worse): a script can tell "the network is bad" from
// "the question could not be answered".
const ExitTrouble = 2

// init sizes gRPC's message buffers to the messages (internal/grpcbuf).
func init() { grpcbuf.Install() }

func main() {
	if err := signals.Execute(context.Background(), cli.NewCommand(os.Stdout, os.Stderr), os.Args[1:]); err != nil {
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code) // the command already said why: its verdict stays the last line
		}
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(ExitTrouble)
	}
}
