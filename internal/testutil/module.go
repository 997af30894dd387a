package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot returns the directory of the module's go.mod, walking up from
// the test's working directory (its package's directory). It fails t if
// there is none.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
