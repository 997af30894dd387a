package testutil

import (
	"log/slog"
	"testing"

	"github.com/meshperf/meshperf/internal/syncio"
)

// SyncBuffer is a bytes.Buffer that one or more writers (a slog handler
// fed by goroutines under test) and a reader (the test) may use at once:
// syncio.Buffer, which production code may import too. The zero value is
// an empty buffer ready for use; it must not be copied after first use.
type SyncBuffer = syncio.Buffer

// Logger returns a debug-level text logger for t whose lines are kept in
// a SyncBuffer, safe to write after the test ended (a library's
// goroutines may), and printed with t.Log if the test failed.
func Logger(t testing.TB) *slog.Logger {
	b := &SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(b.String())
		}
	})
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
