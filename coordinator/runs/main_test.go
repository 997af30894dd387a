package runs

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a run's loop, its dispatch or an external server's watcher.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
