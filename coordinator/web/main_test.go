package web

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a page's handler or a fake backend's stream.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
