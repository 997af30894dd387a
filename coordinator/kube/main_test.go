package kube

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a resync loop or a watch.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
