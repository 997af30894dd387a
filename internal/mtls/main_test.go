package mtls_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a TLS server, a reloader or a connection.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
