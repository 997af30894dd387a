package runner

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine (a process waiter of
// proc, a probe) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
