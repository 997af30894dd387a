package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil"
)

// testPrefixStart begins every prefix these tests use; runIn and startIn
// refuse any namespace whose name does not start with it, so no probe ever
// runs in the root namespace (or in another engineer's lab).
const testPrefixStart = "lt"

// requireLab skips the test unless it runs as root with every tool the lab
// and the probes need (tools.txt's lab and labtest programs).
func requireLab(t *testing.T) {
	t.Helper()
	testskip.Lab(t, "deploy/lab/install-deps.sh installs it", toolsFor("lab", "labtest")...)
}

// testPrefix returns a prefix no other test, package or engineer uses.
func testPrefix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return testPrefixStart + hex.EncodeToString(b)
}

// downOnCleanup registers a Down of prefix, with its own timeout, that runs
// however the test ends.
func downOnCleanup(t *testing.T, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := Down(ctx, prefix, nil); err != nil {
			t.Errorf("cleanup: Down(%s): %v", prefix, err)
		}
	})
}

// upLab builds a lab for the test and removes it when the test ends.
func upLab(t *testing.T, cfg Config) *Lab {
	t.Helper()
	downOnCleanup(t, cfg.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up(%+v): %v", cfg, err)
	}
	t.Logf("Up %s, %d nodes, %s: %v", cfg.Prefix, len(l.Nodes), l.Mode, time.Since(start))
	return l
}

// checkLabNS fails the test unless nsPath is a namespace of a test lab.
func checkLabNS(t *testing.T, nsPath string) {
	t.Helper()
	if !strings.HasPrefix(nsPath, NetNSDir+"/"+testPrefixStart) {
		t.Fatalf("refusing to run outside a test lab namespace: %q", nsPath)
	}
}

// newNSCmd returns argv run inside nsPath, in its own process group, killed
// as a group when ctx ends.
func newNSCmd(ctx context.Context, nsPath string, argv ...string) *exec.Cmd {
	full := NSExec(nsPath, argv...)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// runIn runs argv inside the lab namespace nsPath for at most timeout and
// returns its combined output and its error (non-nil on a non-zero exit).
func runIn(t *testing.T, timeout time.Duration, nsPath string, argv ...string) (string, error) {
	t.Helper()
	checkLabNS(t, nsPath)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := newNSCmd(ctx, nsPath, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, errors.Join(ctx.Err(), err))
	}
	return out.String(), err
}

// server is a process started in a lab namespace; the test's cleanup kills
// its process group and reaps it.
type server struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

// startIn starts argv inside the lab namespace nsPath; it is killed (with
// its process group) at the latest when the test ends.
func startIn(t *testing.T, nsPath string, argv ...string) *server {
	t.Helper()
	checkLabNS(t, nsPath)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := newNSCmd(ctx, nsPath, argv...)
	s := &server{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %v: %v", argv, err)
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop()
		cancel()
	})
	return s
}

// stop kills the server's process group and waits until it is reaped.
func (s *server) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// waitListening waits (at most 5 s, each ss run included) until
// something listens on port (proto "t" for TCP, "u" for UDP) in the lab
// namespace nsPath.
func waitListening(t *testing.T, nsPath, proto string, port int) {
	t.Helper()
	const limit = 5 * time.Second
	deadline := time.Now().Add(limit)
	testutil.WaitFor(t, context.Background(), limit, 50*time.Millisecond, fmt.Sprintf("a listener on %s port %d in %s", proto, port, nsPath), func() string {
		out, err := runIn(t, max(time.Until(deadline), time.Millisecond), nsPath, "ss", "-Hln"+proto, "sport", "=", ":"+strconv.Itoa(port))
		switch {
		case err != nil:
			return err.Error()
		case strings.TrimSpace(out) == "":
			return "nothing listens"
		}
		return ""
	})
}
