package clidoc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// UpdateEnv is the environment variable that makes the binaries'
// reference tests write their pages instead of checking them: `make docs`
// runs them with MESHPERF_UPDATE_DOCS=1.
const UpdateEnv = "MESHPERF_UPDATE_DOCS"

// Sync keeps the page at path equal to Render(root, source). With update
// it writes the page (mode 0644, creating its directory) and returns any
// write error. Without, it reads the page and returns an error when the
// file is missing or differs from the rendering; the error names the
// page, the first line that differs (both versions) and `make docs`, which
// rewrites the pages.
func Sync(path string, root *cobra.Command, source string, update bool) error {
	want := Render(root, source)
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write the CLI reference: %w", err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			return fmt.Errorf("write the CLI reference: %w", err)
		}
		return nil
	}
	have, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing: run `make docs` to generate the CLI reference of %s: %w", path, source, err)
	}
	if err != nil {
		return fmt.Errorf("read the CLI reference: %w", err)
	}
	if bytes.Equal(have, want) {
		return nil
	}
	line, w, h := firstDiff(want, have)
	return fmt.Errorf("%s is stale: the commands of %s render it differently; run `make docs` and commit the result "+
		"(first difference at line %d: want %q, have %q)", path, source, line, w, h)
}

// firstDiff returns the 1-based number of the first line where want and
// have differ, and that line of each ("" past the end).
func firstDiff(want, have []byte) (line int, w, h string) {
	wl, hl := bytes.Split(want, []byte("\n")), bytes.Split(have, []byte("\n"))
	for i := 0; ; i++ {
		var a, b []byte
		if i < len(wl) {
			a = wl[i]
		}
		if i < len(hl) {
			b = hl[i]
		}
		if !bytes.Equal(a, b) || i >= len(wl) || i >= len(hl) {
			return i + 1, string(a), string(b)
		}
	}
}
