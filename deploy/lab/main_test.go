package lab

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a tool
// process's waiter, a forwarder or a lab watcher left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
