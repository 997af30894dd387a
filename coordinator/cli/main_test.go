package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a follow's watcher, a pprof server or a gRPC connection.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
