package schedule

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a waiter at a gate.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
