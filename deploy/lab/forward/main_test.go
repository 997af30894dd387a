package forward_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a forwarder's accept loop or its pipes.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
