package cluster_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestCancelMidRun cancels a run while its first long iperf3 test runs
// and its pings have ended, once with `coordinator cancel` and once with
// Ctrl-C on `trigger --on-interrupt=cancel`: the run ends canceled, the
// pings' results are kept, every iperf3 test reads canceled (the running
// one stopped, not run to its end), and no iperf3 or qperf process is left
// in any of the lab's namespaces.
func TestCancelMidRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, lab.Config{Nodes: 3, Mode: lab.ModeHostGW})
	args := []string{"--tests", "ping,iperf3_tcp", "--paths", "pod-pod", "--duration", "30s", "--repeats", "1"}
	tests := []struct {
		name string
		// start starts the run and returns its ID and the cancel.
		start func(t *testing.T) (runID string, cancelRun func(t *testing.T))
	}{
		{"coordinator cancel", func(t *testing.T) (string, func(*testing.T)) {
			stdout, stderr, err := e.cli(ctx, append([]string{"trigger", "--no-wait"}, args...)...)
			if err != nil {
				t.Fatalf("trigger: %v\n%s", err, stderr)
			}
			runID := strings.TrimSpace(stdout)
			return runID, func(t *testing.T) {
				out, stderr, err := e.cli(ctx, "cancel", runID)
				if err != nil || !strings.Contains(out, "run "+runID+": cancel") {
					t.Errorf("cancel: %v, %q\n%s", err, out, stderr)
				}
			}
		}},
		{"Ctrl-C on trigger", func(t *testing.T) (string, func(*testing.T)) {
			cmd := exec.CommandContext(ctx, filepath.Join(bins(t), "coordinator"),
				append([]string{"--coordinator", "unix://" + e.c.SocketPath(), "trigger", "--on-interrupt=cancel"}, args...)...)
			var stdout, stderr testutil.SyncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(exited) }() // owner: the cleanup below, which waits for it
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			planned := regexp.MustCompile(`run (\w+): \d+ test\(s\) planned`)
			var runID string
			pollUntil(t, ctx, "trigger to print its run ID", func() bool {
				if m := planned.FindStringSubmatch(stderr.String()); m != nil {
					runID = m[1]
				}
				return runID != ""
			})
			return runID, func(t *testing.T) {
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				select {
				case <-exited:
					// Exit status 1: the run has failed (canceled) pair-paths.
					var exit *exec.ExitError
					err := waitErr
					if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "run "+runID+" canceled") {
						t.Errorf("trigger after Ctrl-C: %v; want exit status 1 after the cancel; stderr:\n%s", err, stderr.String())
					}
				case <-ctx.Done():
					t.Fatalf("trigger did not end after Ctrl-C; stderr:\n%s", stderr.String())
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runID, cancelRun := tt.start(t)
			// The pings (light, first) have ended and an iperf3 client runs.
			pollUntil(t, ctx, "the pings to end and an iperf3 client to run", func() bool {
				run := getRun(t, ctx, e, runID)
				return run.GetTestsDone() >= 6 && len(iperf3Clients(t, e)) > 0
			})
			t.Logf("canceling run %s while %v run", runID, iperf3Clients(t, e))
			cancelRun(t)

			pollUntil(t, ctx, "run "+runID+" to end", func() bool {
				s := getRun(t, ctx, e, runID).GetState()
				return s != measurev1.RunState_RUN_STATE_RUNNING && s != measurev1.RunState_RUN_STATE_QUEUED
			})
			run := getRun(t, ctx, e, runID)
			if run.GetState() != measurev1.RunState_RUN_STATE_CANCELED || !strings.HasPrefix(run.GetMessage(), "canceled by ") ||
				run.GetTestsDone() != run.GetTestsPlanned() {
				t.Errorf("run ended %v %q, %d/%d tests done; want canceled by someone, every test counted",
					run.GetState(), run.GetMessage(), run.GetTestsDone(), run.GetTestsPlanned())
			}
			res := results(t, ctx, e, runID)
			counts := map[string]int{}
			for _, r := range res {
				key := r.GetSpec().GetTest().String() + " " + r.GetStatus().String()
				counts[key]++
				if r.GetSpec().GetTest() == measurev1.Test_TEST_IPERF3_TCP && r.GetStatus() != measurev1.Status_STATUS_CANCELED {
					t.Errorf("iperf3 %s->%s: %v %q; want canceled", r.GetSrcNode(), r.GetDstNode(), r.GetStatus(), r.GetMessage())
				}
			}
			want := map[string]int{"TEST_PING STATUS_OK": 6, "TEST_IPERF3_TCP STATUS_CANCELED": 6}
			for k, n := range want {
				if counts[k] != n {
					t.Errorf("results by test and status %v; want %v", counts, want)
					break
				}
			}
			for _, n := range e.lab.Nodes {
				pollUntil(t, ctx, "no iperf3/qperf in "+n.Name+"'s namespaces", func() bool { return len(toolProcsOf(t, n)) == 0 })
			}
		})
	}
}

// iperf3Clients lists the iperf3 clients running in the lab's namespaces.
func iperf3Clients(t *testing.T, e *env) []nodeProc {
	t.Helper()
	var out []nodeProc
	for _, n := range e.lab.Nodes {
		for _, p := range toolProcsOf(t, n) {
			if filepath.Base(p.argv[0]) == "iperf3" && slices.Contains(p.argv, "-c") {
				out = append(out, p)
			}
		}
	}
	return out
}
