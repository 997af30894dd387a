package monitor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: one of a monitor's checks or the servers its tests start.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
