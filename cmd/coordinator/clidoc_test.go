package main

import (
	"io"
	"os"
	"testing"

	"github.com/meshperf/meshperf/coordinator/cli"
	"github.com/meshperf/meshperf/internal/clidoc"
)

// TestCLIReference fails when docs/cli/coordinator.md is not what internal/clidoc
// renders from the coordinator command tree; `make docs` (MESHPERF_UPDATE_DOCS=1)
// rewrites the page instead.
func TestCLIReference(t *testing.T) {
	root := cli.NewCommand(io.Discard, io.Discard)
	if err := clidoc.Sync("../../docs/cli/coordinator.md", root, "cmd/coordinator", os.Getenv(clidoc.UpdateEnv) == "1"); err != nil {
		t.Fatal(err)
	}
}
