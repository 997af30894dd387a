package registry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the gossip evaluator, a session's receiver or sender, or a plan slot's timer.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
