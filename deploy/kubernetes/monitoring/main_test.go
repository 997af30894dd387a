package monitoring_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// Prometheus or VictoriaMetrics process's waiter, or a scrape client.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
