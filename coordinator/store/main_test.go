package store

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a reader or writer of the store.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
