package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs main itself when the test binary is started as the
// command by TestExitStatus.
func TestMain(m *testing.M) {
	if os.Getenv("MESHPERF_RUN_COORDINATOR_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestExitStatus: an error (bad flag, no coordinator) exits ExitTrouble
// with the reason on stderr, never 1, which is kept for verdicts.
func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"--help"}, 0, ""},
		{"unknown flag", []string{"trigger", "--no-such-flag"}, ExitTrouble, "unknown flag: --no-such-flag"},
		{"no coordinator", []string{"--coordinator", "unix:///nonexistent/coordinator.sock", "--timeout", "2s", "agents"}, ExitTrouble, "list agents"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), "MESHPERF_RUN_COORDINATOR_MAIN=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit status %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}
