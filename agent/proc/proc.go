// Package proc owns how the agent runs external tools: a typed argv (never a
// shell string), LC_ALL=C, a deadline from the context, a process group of its
// own, and SIGKILL to the whole group when the context ends or the run is
// over, so no child outlives its run. A command can run in another network
// namespace through `nsenter --net=PATH` (util-linux).
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxOutputBytes caps what is kept of a command's stdout and of its stderr;
// the rest is dropped and Output.Truncated is set.
const MaxOutputBytes = 8 << 20

// waitDelay bounds how long Wait waits for output pipes after the process
// exited or was killed.
const waitDelay = 2 * time.Second

// ErrNotFound means the program is not installed (not found in PATH).
var ErrNotFound = errors.New("not found in PATH")

// Command is a program and its arguments, run without a shell.
type Command struct {
	// Name is the program, looked up in PATH.
	Name string
	// Args are its arguments, passed as they are.
	Args []string
	// NetNS is the path of a network namespace to run in (/proc/PID/ns/net
	// or /run/netns/NAME); empty means the agent's own namespace.
	NetNS string
}

// Argv returns the full argument vector, nsenter included.
func (c Command) Argv() []string {
	argv := make([]string, 0, len(c.Args)+4)
	if c.NetNS != "" {
		argv = append(argv, "nsenter", "--net="+c.NetNS, "--")
	}
	argv = append(argv, c.Name)
	return append(argv, c.Args...)
}

// String returns the argv joined by spaces, for logs and messages.
func (c Command) String() string { return strings.Join(c.Argv(), " ") }

// Output is what a finished command left.
type Output struct {
	// Stdout and Stderr hold at most MaxOutputBytes each.
	Stdout, Stderr []byte
	// Truncated is set when either stream was longer than MaxOutputBytes.
	Truncated bool
	// ExitCode is the exit status, or -1 if the process was killed by a signal
	// or never started.
	ExitCode int
	// Elapsed is the wall time from start to exit.
	Elapsed time.Duration
}

// Run runs c until it exits or ctx ends, whichever comes first, and kills
// its process group afterwards. A non-zero exit is not an error: it is in
// Output.ExitCode, for the caller to read with the output. The error is
// ErrNotFound (wrapped) if the program is missing, ctx.Err() (wrapped) if ctx
// ended first and the process was killed (Output then holds what was printed
// so far), or another start error.
func Run(ctx context.Context, c Command) (Output, error) {
	p, err := Start(ctx, c)
	if err != nil {
		return Output{ExitCode: -1}, err
	}
	<-p.Done()
	out := p.Output()
	// A tool that exited on its own just before ctx ended is a finished
	// run; only a killed one (ExitCode -1) was cut short.
	if ctxErr := ctx.Err(); ctxErr != nil && out.ExitCode == -1 {
		return out, fmt.Errorf("%s: %w", c.Name, ctxErr)
	}
	return out, nil
}

// Process is a started command: a server, or a client run by Run.
type Process struct {
	cmd            *exec.Cmd
	stdout, stderr *capped
	start          time.Time
	done           chan struct{}

	mu      sync.Mutex
	elapsed time.Duration
}

// Start starts c in its own process group. The group is killed with SIGKILL
// when ctx ends, when Stop is called, or right after the leader exits (so
// forked children go too). Errors are ErrNotFound (wrapped) or the start error.
func Start(ctx context.Context, c Command) (*Process, error) {
	argv := c.Argv()
	if _, err := exec.LookPath(c.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, ErrNotFound)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{
		cmd:    cmd,
		stdout: &capped{limit: MaxOutputBytes},
		stderr: &capped{limit: MaxOutputBytes},
		done:   make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.Cancel = p.killGroup
	cmd.WaitDelay = waitDelay
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%s: %w", argv[0], ErrNotFound)
		}
		return nil, fmt.Errorf("start %s: %w", c.Name, err)
	}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	_ = p.cmd.Wait()  // the exit status is read from ProcessState
	_ = p.killGroup() // reap anything the tool forked
	p.mu.Lock()
	p.elapsed = time.Since(p.start)
	p.mu.Unlock()
	close(p.done)
}

// killGroup sends SIGKILL to the process group; a group that is gone is fine.
func (p *Process) killGroup() error {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}

// Pid is the process ID (also the process group ID).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited and its group was killed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop kills the process group and waits until the process is reaped.
func (p *Process) Stop() error {
	err := p.killGroup()
	<-p.done
	return err
}

// Output returns what the process printed so far; ExitCode is -1 while it runs.
func (p *Process) Output() Output {
	out := Output{ExitCode: -1}
	out.Stdout, out.Truncated = p.stdout.snapshot()
	var errTrunc bool
	out.Stderr, errTrunc = p.stderr.snapshot()
	out.Truncated = out.Truncated || errTrunc
	select {
	case <-p.done:
		p.mu.Lock()
		out.Elapsed = p.elapsed
		if p.cmd.ProcessState != nil {
			out.ExitCode = p.cmd.ProcessState.ExitCode()
		}
		p.mu.Unlock()
	default:
		out.Elapsed = time.Since(p.start)
	}
	return out
}

// capped is an io.Writer that keeps the first limit bytes and drops the rest.
type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (c *capped) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.buf.Len()
	if room < len(b) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(b[:room])
		}
		return len(b), nil
	}
	c.buf.Write(b)
	return len(b), nil
}

func (c *capped) snapshot() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), c.truncated
}
