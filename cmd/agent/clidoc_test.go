package main

import (
	"io"
	"os"
	"testing"

	"github.com/meshperf/meshperf/internal/clidoc"
)

// TestCLIReference fails when docs/cli/agent.md is not what internal/clidoc
// renders from the agent command tree; `make docs` (MESHPERF_UPDATE_DOCS=1)
// rewrites the page instead.
func TestCLIReference(t *testing.T) {
	// The defaults of --node and --host-ip come from the environment: the
	// reference shows them empty.
	t.Setenv("NODE_NAME", "")
	t.Setenv("HOST_IP", "")
	root := NewCommand(io.Discard, io.Discard)
	if err := clidoc.Sync("../../docs/cli/agent.md", root, "cmd/agent", os.Getenv(clidoc.UpdateEnv) == "1"); err != nil {
		t.Fatal(err)
	}
}
