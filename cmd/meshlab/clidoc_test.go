package main

import (
	"io"
	"os"
	"testing"

	"github.com/meshperf/meshperf/internal/clidoc"
)

// TestCLIReference fails when docs/cli/meshlab.md is not what internal/clidoc
// renders from the meshlab command tree; `make docs` (MESHPERF_UPDATE_DOCS=1)
// rewrites the page instead.
func TestCLIReference(t *testing.T) {
	root := NewCommand(io.Discard, io.Discard)
	if err := clidoc.Sync("../../docs/cli/meshlab.md", root, "cmd/meshlab", os.Getenv(clidoc.UpdateEnv) == "1"); err != nil {
		t.Fatal(err)
	}
}
