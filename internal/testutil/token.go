package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// TokenFile writes token and a newline, as a mounted Secret holds it, to
// a file of mode 0600 in a directory of tb's own and returns its path;
// the directory goes when the test ends. A failed write fails tb.
func TokenFile(tb testing.TB, token string) string {
	tb.Helper()
	f := filepath.Join(tb.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return f
}
