package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testskip"
)

// ToolGate holds runs of a tool in their start: a stand-in first in PATH
// records its PID, waits until the test opens the gate and then execs the
// real tool (same PID, same process group). It lets a test act while a
// server is starting: its process runs, its port does not listen yet.
type ToolGate struct{ dir, open string }

// NewToolGate puts a stand-in for tool first in t's PATH (t.Setenv, so the
// test must not be parallel) and returns its gate. With holdArg "", every
// run of tool is held; otherwise only runs whose first argument is holdArg
// (qperf's "-lp" holds servers and lets the version probe through). It
// skips t if tool is not installed and fails it if the stand-in cannot be
// written. The gate opens when the test ends, so that no stand-in is left
// waiting.
func NewToolGate(t testing.TB, tool, holdArg string) *ToolGate {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf(testskip.ToolPrefix+"%s", tool)
	}
	dir := t.TempDir()
	g := &ToolGate{dir: dir, open: filepath.Join(dir, "open")}
	hold := fmt.Sprintf(": > '%s/started.'$$\nwhile [ ! -e '%s' ]; do sleep 0.01; done\n", dir, g.open)
	if holdArg != "" {
		hold = fmt.Sprintf("if [ \"$1\" = '%s' ]; then\n%sfi\n", holdArg, hold)
	}
	script := fmt.Sprintf("#!/bin/sh\n%sexec '%s' \"$@\"\n", hold, path)
	if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Cleanup(func() { _ = os.WriteFile(g.open, nil, 0o644) })
	return g
}

// Started returns the PIDs of the held runs that began, in no particular
// order.
func (g *ToolGate) Started() []int {
	files, _ := filepath.Glob(filepath.Join(g.dir, "started.*"))
	var pids []int
	for _, f := range files {
		if pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Ext(f), ".")); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Release opens the gate: held runs go on to exec the tool, later runs
// are not held. It fails t if the gate file cannot be written.
func (g *ToolGate) Release(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(g.open, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
