package testutil

import (
	"os/exec"
	"syscall"
	"testing"
)

// StartGroup starts cmd in a process group of its own, sent SIGKILL if
// the thread that started it dies (Pdeathsig), and returns a channel that
// yields cmd.Wait's error once the process exited; the goroutine that
// waits ends then. It fails t if cmd does not start. It replaces
// cmd.SysProcAttr. The caller ends the group (syscall.Kill(-pid, sig))
// at its cleanup, so that the waiter ends with the test.
func StartGroup(t testing.TB, cmd *exec.Cmd) <-chan error {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // owner: the process; it ends when the process exits
	return done
}
