package alert_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: an alerter's Run loop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
