// Package labtest brings up what the end-to-end tests of several packages
// share: a lab (deploy/lab) under a prefix of its own with meshperf
// running in it (deploy/lab/cluster), torn down when the test ends and its
// processes' logs printed if the test failed (Start); the agent and
// coordinator binaries it runs (Build, Binaries, Main); a lab prefix no
// other test uses (Prefix) and a Down that runs however the test ends
// (DownOnCleanup); and the tail of a log (LogTail).
//
// Only test files import this package. Every helper takes the test's
// testing.TB, fails through it and registers its own cleanup, so a caller
// has nothing to undo.
package labtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
)

// downTimeout bounds the Down that DownOnCleanup registers: it only turns
// a hang into a failure.
const downTimeout = 2 * time.Minute

// buildTimeout bounds the build of Binaries.
const buildTimeout = 10 * time.Minute

// defaultLogLines is how many last lines of each log Start prints of a
// failed test when Options.LogLines is 0.
const defaultLogLines = 60

// Build builds cmd/agent and cmd/coordinator into dir, as agent and
// coordinator. The error holds the compiler's output.
func Build(ctx context.Context, dir string) error {
	out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator),
		"github.com/meshperf/meshperf/cmd/agent", "github.com/meshperf/meshperf/cmd/coordinator").CombinedOutput()
	if err != nil {
		return fmt.Errorf("build the binaries: %w\n%s", err, out)
	}
	return nil
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries returns the directory of the agent and coordinator binaries,
// built (Build) once per test binary, at the first call, into a temporary
// directory that Main removes at exit. It fails t if they cannot be
// built, in every test that asks.
func Binaries(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "meshperf-labtest-bin-")
		if binErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		binErr = Build(ctx, binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// Main is the TestMain of a package that calls Binaries: it runs the
// tests, fails them if a goroutine outlives them (goleak) and removes the
// binaries before it exits with their code.
func Main(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

// Prefix returns a lab prefix that no other test, package or engineer
// uses: start (a few letters naming the tests) and six random hex digits.
func Prefix(start string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return start + hex.EncodeToString(b)
}

// DownOnCleanup registers a lab.Down of prefix, with its own timeout,
// that runs however the test ends; a failed Down fails t. Registered
// before lab.Up, it also removes a half-built lab.
func DownOnCleanup(t testing.TB, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), downTimeout)
		defer cancel()
		if err := lab.Down(ctx, prefix, nil); err != nil {
			t.Errorf("lab down %s: %v", prefix, err)
		}
	})
}

// LogTail logs (t.Logf) the last lines lines of file, under its name.
func LogTail(t testing.TB, file string, lines int) {
	t.Helper()
	b, _ := os.ReadFile(file)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	t.Logf("==> %s\n%s", file, strings.Join(ls, "\n"))
}

// Options is what Start brings up. The zero value but for Name and BinDir
// is a default lab (lab.Config's defaults) with meshperf's defaults.
type Options struct {
	// Name begins the lab's prefix (Prefix adds random digits).
	Name string
	// Lab is the lab's config; Start replaces its Prefix.
	Lab lab.Config
	// BinDir holds the agent and coordinator binaries (Binaries, Build).
	BinDir string
	// WorkDir is the cluster's work directory (its store and logs); ""
	// is a fresh t.TempDir(). Labs started one after the other with one
	// WorkDir share one store.
	WorkDir string
	// CoordinatorConfig, if not empty, is the coordinator's YAML config:
	// Start writes it to WorkDir/coordinator.yaml and passes --config.
	CoordinatorConfig string
	// CoordinatorArgs are more arguments of the coordinator, after
	// --config if any.
	CoordinatorArgs []string
	// Edit, if set, changes the cluster's Config (HeartbeatInterval
	// 500 ms, the fields above) before the cluster is made.
	Edit func(*cluster.Config)
	// StartTimeout bounds the cluster's Start; 0 leaves it to ctx.
	StartTimeout time.Duration
	// LogLines is how many last lines of each process's log Start prints
	// when the test failed; 0 means 60.
	LogLines int
}

// Env is a lab with meshperf running in it.
type Env struct {
	// Lab is the lab.
	Lab *lab.Lab
	// Cluster is meshperf's coordinator and agents in Lab.
	Cluster *cluster.Cluster
	// WorkDir is the cluster's work directory.
	WorkDir string
}

// Start brings up a lab under a prefix of its own (Options.Name and
// random digits) and meshperf in it, and returns them once the cluster
// started. Both are torn down when the test ends (the cluster first),
// and the last lines of every process's log are printed if the test
// failed. It fails t if any step fails.
func Start(t testing.TB, ctx context.Context, o Options) *Env {
	t.Helper()
	work := o.WorkDir
	if work == "" {
		work = t.TempDir()
	}
	cfg := o.Lab
	cfg.Prefix = Prefix(o.Name)
	DownOnCleanup(t, cfg.Prefix)
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	var args []string
	if o.CoordinatorConfig != "" {
		conf := filepath.Join(work, "coordinator.yaml")
		if err := os.WriteFile(conf, []byte(o.CoordinatorConfig), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", conf)
	}
	args = append(args, o.CoordinatorArgs...)
	ccfg := cluster.Config{Lab: l, BinDir: o.BinDir, WorkDir: work, HeartbeatInterval: 500 * time.Millisecond, CoordinatorArgs: args}
	if o.Edit != nil {
		o.Edit(&ccfg)
	}
	work = ccfg.WorkDir
	c, err := cluster.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	lines := o.LogLines
	if lines <= 0 {
		lines = defaultLogLines
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(work, "logs", "*.log"))
			for _, f := range logs {
				LogTail(t, f, lines)
			}
		}
	})
	sctx := ctx
	if o.StartTimeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, o.StartTimeout)
		defer cancel()
	}
	if err := c.Start(sctx); err != nil {
		t.Fatal(err)
	}
	return &Env{Lab: l, Cluster: c, WorkDir: work}
}
