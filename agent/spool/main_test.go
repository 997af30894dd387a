package spool_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a writer waiting for the spool's lock.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
