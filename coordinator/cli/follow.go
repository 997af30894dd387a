package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/meshperf/meshperf/internal/syncio"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// This file holds what `trigger` does on Ctrl-C while it watches its run
// (--on-interrupt).

// What an interrupt while watching does (--on-interrupt).
const (
	// onInterruptAsk asks once on the terminal whether to cancel the run.
	onInterruptAsk = "ask"
	// onInterruptCancel cancels the run and watches it end.
	onInterruptCancel = "cancel"
	// onInterruptDetach stops watching and leaves the run going.
	onInterruptDetach = "detach"
)

// ExitInterrupted is the exit status of a `trigger` that stopped watching
// on Ctrl-C and left its run going (128 + SIGINT, the shells' convention).
const ExitInterrupted = 130

// interruptPolicy resolves --on-interrupt: empty means ask when stdin is
// a terminal (someone can answer) and detach otherwise (scripts, CI).
func interruptPolicy(flag string, stdinTerminal bool) (string, error) {
	switch flag {
	case onInterruptAsk, onInterruptCancel, onInterruptDetach:
		return flag, nil
	case "":
		if stdinTerminal {
			return onInterruptAsk, nil
		}
		return onInterruptDetach, nil
	}
	return "", fmt.Errorf("--on-interrupt %q: want ask, cancel or detach", flag)
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// follower watches a run and acts on the interrupts that arrive meanwhile.
type follower struct {
	o      *options
	client meshv1.MeshServiceClient
	run    *measurev1.Run
	// policy is onInterruptAsk, onInterruptCancel or onInterruptDetach.
	policy string
	// interrupts delivers each Ctrl-C; nil means none arrive.
	interrupts <-chan struct{}
	// answers is where the answer to the question is read (stdin).
	answers io.Reader
}

// follow watches the run until it ends (nil: the caller prints it). On
// the first interrupt it does what the policy says: ask once "cancel run
// X? [y/N]" (y cancels, anything else detaches), cancel the run and go on
// watching it end, or detach; a detach returns an ExitError with code
// ExitInterrupted after saying how to follow the run. A second interrupt
// returns at once, the same way.
func (f *follower) follow(ctx context.Context) error {
	id := f.run.GetRunId()
	// The watch draws progress on stderr while follow writes there too.
	o := *f.o
	o.stderr = syncio.NewWriter(f.o.stderr)
	f.o = &o
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	done := make(chan error, 1)
	go func() { done <- watch(watchCtx, f.o, f.client, f.run) }() // owner: follow, which waits for it
	stop := func(why string) error {
		stopWatch()
		<-done //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
		fmt.Fprintf(f.o.stderr, "%s; run %s goes on in the coordinator: follow it with `coordinator runs` and `coordinator results --run %s`, stop it with `coordinator cancel %s`\n",
			why, id, id, id)
		return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("stopped watching run %s", id)}
	}
	var (
		answer   chan bool // the question's answer; nil when not asking
		canceled bool      // CancelRun was called
	)
	cancelRun := func() error {
		canceled = true
		callCtx, cancel := f.o.call(ctx)
		defer cancel()
		resp, err := f.client.CancelRun(callCtx, &meshv1.CancelRunRequest{RunId: id})
		if err != nil {
			stopWatch()
			<-done //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
			return fmt.Errorf("cancel run %s: %w", id, err)
		}
		fmt.Fprintf(f.o.stderr, "run %s canceled (%s); waiting for its running tests to stop (Ctrl-C again stops waiting)\n",
			id, testspec.RunStateName(resp.GetRun().GetState()))
		return nil
	}
	for {
		select {
		case err := <-done:
			return err
		case <-f.interrupts:
			switch {
			case answer != nil || canceled:
				return stop("interrupted again")
			case f.policy == onInterruptCancel:
				if err := cancelRun(); err != nil {
					return err
				}
			case f.policy == onInterruptAsk:
				answer = make(chan bool, 1)
				fmt.Fprintf(f.o.stderr, "\ncancel run %s? [y/N] ", id)
				go func() { answer <- readYes(f.answers) }() // ends with the answer, or with the process
			default:
				return stop("interrupted")
			}
		case yes := <-answer:
			answer = nil
			if !yes {
				return stop("not canceled")
			}
			if err := cancelRun(); err != nil {
				return err
			}
		}
	}
}

// readYes reads one line from r: "y" or "yes" (any case) is a yes;
// anything else, an empty line and a read error (EOF) are a no.
func readYes(r io.Reader) bool {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}
