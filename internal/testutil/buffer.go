package testutil

import (
	"log/slog"
	"strings"
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

// StreamLogger returns a debug-level text logger for t that writes each
// line through t.Log as it comes, so that `go test -v` (and -json) shows
// it in order with the test's own lines, also when the test then hangs
// until go test's timeout. Only for code that stops logging before the
// test ends (t.Log after that panics): the lab's commands; use Logger
// for a library whose goroutines may log later.
func StreamLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tWriter writes each Write through t.Log, without its final newline.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
