package lab

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a lab test's server process when
// serverProcEnv says so (runServerProc); otherwise it runs the tests and
// fails them if a goroutine outlives them: a tool process's waiter, a
// forwarder or a lab watcher left running.
func TestMain(m *testing.M) {
	if code, ran := runServerProc(); ran {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
