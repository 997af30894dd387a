package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// TestMain fails the package if a process waiter outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestArgv(t *testing.T) {
	tests := []struct {
		name string
		cmd  proc.Command
		want []string
	}{
		{"plain", proc.Command{Name: "ping", Args: []string{"-c", "1", "127.0.0.1"}}, []string{"ping", "-c", "1", "127.0.0.1"}},
		{"no args", proc.Command{Name: "true"}, []string{"true"}},
		{"netns", proc.Command{Name: "qperf", Args: []string{"-lp", "1"}, NetNS: "/run/netns/x"},
			[]string{"nsenter", "--net=/run/netns/x", "--", "qperf", "-lp", "1"}},
		{"argument with spaces stays one", proc.Command{Name: "echo", Args: []string{"a b; rm -rf /"}}, []string{"echo", "a b; rm -rf /"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cmd.Argv()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Argv() mismatch (-want +got):\n%s", diff)
			}
			if got, want := tt.cmd.String(), strings.Join(tt.want, " "); got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
}

func TestRunOutputAndExitCode(t *testing.T) {
	testnet.NeedTools(t, "sh", "echo")
	tests := []struct {
		name       string
		cmd        proc.Command
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{"stdout, exit 0", proc.Command{Name: "echo", Args: []string{"hello", "world"}}, "hello world\n", "", 0},
		{"args are not shell words", proc.Command{Name: "echo", Args: []string{"$HOME", "`id`"}}, "$HOME `id`\n", "", 0},
		{"both streams, exit 3", proc.Command{Name: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}}, "out\n", "err\n", 3},
		{"false", proc.Command{Name: "false"}, "", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := proc.Run(testnet.Ctx(t, time.Minute), tt.cmd)
			if err != nil {
				t.Fatalf("Run: %v (a non-zero exit is not an error)", err)
			}
			if out.ExitCode != tt.wantCode {
				t.Errorf("ExitCode = %d, want %d", out.ExitCode, tt.wantCode)
			}
			if got := string(out.Stdout); got != tt.wantStdout {
				t.Errorf("Stdout = %q, want %q", got, tt.wantStdout)
			}
			if got := string(out.Stderr); got != tt.wantStderr {
				t.Errorf("Stderr = %q, want %q", got, tt.wantStderr)
			}
			if out.Truncated {
				t.Error("Truncated is set for a short output")
			}
			if out.Elapsed <= 0 {
				t.Errorf("Elapsed = %v, want > 0", out.Elapsed)
			}
		})
	}
}

// TestRunLocale checks that LC_ALL=C reaches the child and wins over the
// agent's own locale variables.
func TestRunLocale(t *testing.T) {
	testnet.NeedTools(t, "printenv")
	for _, agentLocale := range []string{"", "de_DE.UTF-8"} {
		t.Run("agent LC_ALL="+agentLocale, func(t *testing.T) {
			t.Setenv("LC_ALL", agentLocale)
			out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "printenv", Args: []string{"LC_ALL"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(out.Stdout); got != "C\n" {
				t.Errorf("child's LC_ALL = %q, want %q", got, "C\n")
			}
		})
	}
}

func TestRunNotFound(t *testing.T) {
	tests := []struct {
		name string
		cmd  proc.Command
	}{
		{"plain", proc.Command{Name: "meshperf-no-such-tool"}},
		{"in a namespace", proc.Command{Name: "meshperf-no-such-tool", NetNS: fmt.Sprintf("/proc/%d/ns/net", os.Getpid())}},
		{"missing absolute path", proc.Command{Name: "/nonexistent/meshperf-tool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := proc.Run(testnet.Ctx(t, time.Minute), tt.cmd)
			if !errors.Is(err, proc.ErrNotFound) {
				t.Fatalf("Run error = %v, want ErrNotFound", err)
			}
			if !strings.Contains(err.Error(), tt.cmd.Name) {
				t.Errorf("error %q does not name %q", err, tt.cmd.Name)
			}
			if out.ExitCode != -1 {
				t.Errorf("ExitCode = %d, want -1", out.ExitCode)
			}
			if _, err := proc.Start(testnet.Ctx(t, time.Minute), tt.cmd); !errors.Is(err, proc.ErrNotFound) {
				t.Errorf("Start error = %v, want ErrNotFound", err)
			}
		})
	}
}

// pidsOf parses the PIDs a test script printed.
func pidsOf(t *testing.T, b []byte) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q: %v", b, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestKillsChildren checks that every way a run ends takes the tool's
// children with it: the script prints the PID of a child it forked and its
// own, then waits.
func TestKillsChildren(t *testing.T) {
	testnet.NeedTools(t, "sh", "sleep")
	// The background sleep is a grandchild of ours; the shell waits in a
	// foreground sleep of its own.
	const script = "sleep 30 & echo $! $$; sleep 30"

	t.Run("Run until the deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(testnet.Ctx(t, time.Minute), 2*time.Second)
		defer cancel()
		out, err := proc.Run(ctx, proc.Command{Name: "sh", Args: []string{"-c", script}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run error = %v, want DeadlineExceeded", err)
		}
		if out.ExitCode != -1 {
			t.Errorf("ExitCode = %d, want -1 (killed)", out.ExitCode)
		}
		pids := pidsOf(t, out.Stdout)
		if len(pids) != 2 {
			t.Fatalf("script printed %q, want two PIDs (did it start within the deadline?)", out.Stdout)
		}
		testutil.WaitGone(t, pids[1], pids)
	})

	for _, how := range []string{"ctx canceled", "Stop"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(testnet.Ctx(t, time.Minute))
			defer cancel()
			p, err := proc.Start(ctx, proc.Command{Name: "sh", Args: []string{"-c", script}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Stop() }()
			var pids []int
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for len(pids) < 2 {
				select {
				case <-p.Done():
					t.Fatalf("script ended early: %+v", p.Output())
				case <-tick.C:
				}
				if out := p.Output(); bytes.HasSuffix(out.Stdout, []byte("\n")) {
					pids = pidsOf(t, out.Stdout)
				}
			}
			if pids[1] != p.Pid() {
				t.Errorf("shell PID %d, Pid() = %d", pids[1], p.Pid())
			}
			if got := p.Output().ExitCode; got != -1 {
				t.Errorf("ExitCode while running = %d, want -1", got)
			}
			if !testutil.ProcAlive(pids[0]) {
				t.Fatalf("the background child %d is not running before the kill", pids[0])
			}
			switch how {
			case "ctx canceled":
				cancel()
				<-p.Done()
			case "Stop":
				if err := p.Stop(); err != nil {
					t.Errorf("Stop: %v", err)
				}
				select {
				case <-p.Done():
				default:
					t.Error("Done is not closed after Stop returned")
				}
			}
			if got := p.Output().ExitCode; got != -1 {
				t.Errorf("ExitCode = %d, want -1 (killed)", got)
			}
			testutil.WaitGone(t, p.Pid(), pids)
			if err := p.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}

	// A leader that exits by itself must not leave its children behind,
	// whether or not they hold its output pipes.
	tests := []struct{ name, script string }{
		{"child detached from the pipes", "sleep 30 >/dev/null 2>&1 & echo $!"},
		{"child holding the pipes", "sleep 30 & echo $!"},
	}
	for _, tt := range tests {
		t.Run("leader exits, "+tt.name, func(t *testing.T) {
			out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "sh", Args: []string{"-c", tt.script}})
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != 0 {
				t.Errorf("ExitCode = %d, want 0", out.ExitCode)
			}
			pids := pidsOf(t, out.Stdout)
			if len(pids) != 1 {
				t.Fatalf("script printed %q, want one PID", out.Stdout)
			}
			testutil.WaitGone(t, 0, pids)
		})
	}
}

func TestTruncated(t *testing.T) {
	testnet.NeedTools(t, "sh", "head")
	const limit = proc.MaxOutputBytes
	tests := []struct {
		name      string
		stream    string // "stdout" or "stderr"
		size      int
		truncated bool
	}{
		{"stdout below the cap", "stdout", limit - 1, false},
		{"stdout at the cap", "stdout", limit, false},
		{"stdout over the cap", "stdout", limit + 1, true},
		{"stdout far over the cap", "stdout", 2*limit + 12345, true},
		{"stderr over the cap", "stderr", limit + 4096, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := "head -c " + strconv.Itoa(tt.size) + " /dev/zero; echo done >&2"
			if tt.stream == "stderr" {
				script = "head -c " + strconv.Itoa(tt.size) + " /dev/zero >&2; echo done"
			}
			out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "sh", Args: []string{"-c", script}})
			if err != nil {
				t.Fatal(err)
			}
			big, small := out.Stdout, out.Stderr
			if tt.stream == "stderr" {
				big, small = out.Stderr, out.Stdout
			}
			if want := min(tt.size, limit); len(big) != want {
				t.Errorf("%s holds %d bytes, want %d", tt.stream, len(big), want)
			}
			if string(small) != "done\n" {
				t.Errorf("other stream = %q, want %q", small, "done\n")
			}
			if out.Truncated != tt.truncated {
				t.Errorf("Truncated = %v, want %v", out.Truncated, tt.truncated)
			}
			if out.ExitCode != 0 {
				t.Errorf("ExitCode = %d, want 0 (the tool must not get a write error)", out.ExitCode)
			}
		})
	}
}

func TestNetNS(t *testing.T) {
	path := testnet.NewNetNS(t, "mp-proc")
	tests := []struct {
		name      string
		netns     string
		wantOnlyL bool
	}{
		{"throwaway namespace", path, true},
		{"own namespace", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "ip", Args: []string{"-o", "link"}, NetNS: tt.netns})
			if err != nil || out.ExitCode != 0 {
				t.Fatalf("ip -o link: %v, exit %d: %s", err, out.ExitCode, out.Stderr)
			}
			var names []string
			for _, line := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
				// "1: lo: <LOOPBACK> mtu ..."
				if f := strings.Fields(line); len(f) > 1 {
					names = append(names, strings.TrimSuffix(f[1], ":"))
				}
			}
			onlyLo := slices.Equal(names, []string{"lo"})
			if onlyLo != tt.wantOnlyL {
				t.Errorf("links %v: only lo = %v, want %v", names, onlyLo, tt.wantOnlyL)
			}
		})
	}

	t.Run("missing namespace", func(t *testing.T) {
		bad := path + "-missing"
		out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "true", NetNS: bad})
		if err != nil {
			t.Fatalf("Run: %v (nsenter's failure is an exit status)", err)
		}
		if out.ExitCode == 0 || !strings.Contains(string(out.Stderr), bad) {
			t.Errorf("exit %d, stderr %q: want a failure naming %s", out.ExitCode, out.Stderr, bad)
		}
	})
}
