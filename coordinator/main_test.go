package coordinator_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: one of a coordinator's servers or loops (probe sync, compaction), or a gRPC connection.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
