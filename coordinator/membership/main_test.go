package membership_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: one a tracker's caller started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
