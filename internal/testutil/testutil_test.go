package testutil

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSyncBuffer: concurrent writers lose no byte (run with -race to see
// a data race if the lock were missing).
func TestSyncBuffer(t *testing.T) {
	for _, tt := range []struct {
		name    string
		writers int
		line    string
	}{{"one writer", 1, "a\n"}, {"eight writers", 8, "line of a log\n"}} {
		t.Run(tt.name, func(t *testing.T) {
			var b SyncBuffer
			var wg sync.WaitGroup
			for range tt.writers {
				wg.Go(func() {
					for range 100 {
						if n, err := b.Write([]byte(tt.line)); n != len(tt.line) || err != nil {
							t.Errorf("Write = %d, %v", n, err)
						}
						_ = b.String()
					}
				})
			}
			wg.Wait()
			if got, want := b.String(), strings.Repeat(tt.line, 100*tt.writers); got != want {
				t.Errorf("String() has %d bytes, want %d", len(got), len(want))
			}
		})
	}
}

// TestPoll: Poll returns once cond holds, or with cond's last reason and
// the context's error once the context ends.
func TestPoll(t *testing.T) {
	for _, tt := range []struct {
		name    string
		holdsAt int // call from which cond holds; 0 = never
		wantErr bool
	}{{"at once", 1, false}, {"on the third call", 3, false}, {"never", 0, true}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			calls := 0
			err := Poll(ctx, time.Millisecond, func() string {
				calls++
				if tt.holdsAt > 0 && calls >= tt.holdsAt {
					return ""
				}
				return "call " + strconv.Itoa(calls)
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Poll = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "call "+strconv.Itoa(calls)) {
					t.Errorf("Poll = %v, want the last reason (call %d) and DeadlineExceeded", err, calls)
				}
				return
			}
			if calls != tt.holdsAt {
				t.Errorf("cond called %d times, want %d", calls, tt.holdsAt)
			}
		})
	}
}

// TestWithin: Within answers whether cond came to hold in time.
func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		name  string
		holds bool
	}{{"holds", true}, {"never", false}} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Within(20*time.Millisecond, time.Millisecond, func() bool { return tt.holds }); got != tt.holds {
				t.Errorf("Within = %v, want %v", got, tt.holds)
			}
		})
	}
}

// TestProcs: what /proc says of this process and of a child that ran,
// ended and was reaped, or ended and was not (a zombie).
func TestProcs(t *testing.T) {
	self := os.Getpid()
	if !ProcAlive(self) {
		t.Fatal("ProcAlive(self) = false")
	}
	if argv := Cmdline(self); len(argv) == 0 || filepath.Base(argv[0]) != filepath.Base(os.Args[0]) {
		t.Errorf("Cmdline(self) = %q, want %q first", argv, os.Args[0])
	}
	s, ok := ReadProcStat(self)
	if !ok || s.PPID != os.Getppid() || s.PGRP != syscall.Getpgrp() {
		t.Errorf("ReadProcStat(self) = %+v, %v; want ppid %d", s, ok, os.Getppid())
	}
	if !slices.Contains(ProcGroup(s.PGRP), self) {
		t.Errorf("ProcGroup(%d) lacks this process %d", s.PGRP, self)
	}
	for _, tt := range []struct {
		name string
		reap bool
	}{{"reaped", true}, {"zombie", false}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", "exit 0")
			if err := cmd.Start(); err != nil {
				t.Skip(err)
			}
			pid := cmd.Process.Pid
			t.Cleanup(func() { _ = cmd.Wait() })
			if tt.reap {
				_ = cmd.Wait()
			}
			// The child ends at once: reaped, it is gone; not, a zombie.
			if !Within(10*time.Second, 0, func() bool { return !ProcAlive(pid) }) {
				t.Errorf("ProcAlive(%d) stays true after the child ended", pid)
			}
			if _, ok := ReadProcStat(pid); ok == tt.reap {
				t.Errorf("ReadProcStat(%d) ok = %v, want %v", pid, ok, !tt.reap)
			}
		})
	}
}

// TestProcsInNetNS: this process is found in its own namespace; a
// namespace file that does not exist is an error.
func TestProcsInNetNS(t *testing.T) {
	procs, err := ProcsInNetNS("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(procs, func(p NetNSProc) bool { return p.PID == os.Getpid() && p.NetNS == "/proc/self/ns/net" }) {
		t.Errorf("ProcsInNetNS(own) = %v, lacks pid %d", procs, os.Getpid())
	}
	if _, err := ProcsInNetNS(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("ProcsInNetNS(missing file) = nil error")
	}
}

// TestToolGate: a held run records its PID and does not end before the
// gate opens; an unheld run (holdArg set, other argument) goes through.
func TestToolGate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		holdArg string
		arg     string
		held    bool
	}{{"every run", "", "x", true}, {"holdArg matches", "-lp", "-lp", true}, {"holdArg does not", "-lp", "-V", false}} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewToolGate(t, "true", tt.holdArg)
			cmd := exec.Command("true", tt.arg)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if !tt.held {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := g.Started(); len(got) != 0 {
					t.Errorf("Started() = %v for an unheld run", got)
				}
				return
			}
			if !Within(10*time.Second, 0, func() bool { return slices.Contains(g.Started(), cmd.Process.Pid) }) {
				t.Fatalf("Started() = %v, lacks %d", g.Started(), cmd.Process.Pid)
			}
			select {
			case err := <-done:
				t.Fatalf("held run ended before Release: %v", err)
			default:
			}
			g.Release(t)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOnlyTestsImport: no production (non-_test.go) file of the module
// imports a test-support package (this one, or a package below it:
// fakeagent, kubetest, identitytest, labtest), outside that package
// itself.
func TestOnlyTestsImport(t *testing.T) {
	root := ModuleRoot(t)
	const module = "github.com/meshperf/meshperf/"
	supports := []string{"internal/testutil"}
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			for _, sup := range supports {
				own := filepath.Join(root, filepath.FromSlash(sup)) + string(filepath.Separator)
				if (p == module+sup || strings.HasPrefix(p, module+sup+"/")) && !strings.HasPrefix(path, own) {
					bad = append(bad, path+" imports "+p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("production files import test-support packages: %v", bad)
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors, fatals int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Fatalf(string, ...any) { r.fatals++ }
func (r *recorder) Skipf(string, ...any)  {}
func (r *recorder) Cleanup(f func())      { r.TB.Cleanup(f) }

// TestEventually: Eventually, WaitFor and EventuallyCtx fail fatally, Expect
// marks the failure and answers false, each only when cond never holds.
func TestEventually(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		holds                 bool
		wantErrors, wantFatal int
	}{{"holds", true, 0, 0}, {"never", false, 1, 3}} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			cond := func() bool { return tt.holds }
			Eventually(r, 20*time.Millisecond, time.Millisecond, "x", cond)
			WaitFor(r, context.Background(), 20*time.Millisecond, time.Millisecond, "x", func() string {
				if cond() {
					return ""
				}
				return "not yet"
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			EventuallyCtx(r, ctx, time.Millisecond, "x", cond)
			if ok := Expect(r, 20*time.Millisecond, time.Millisecond, "x", cond); ok != tt.holds {
				t.Errorf("Expect = %v, want %v", ok, tt.holds)
			}
			if r.errors != tt.wantErrors || r.fatals != tt.wantFatal {
				t.Errorf("errors, fatals = %d, %d; want %d, %d", r.errors, r.fatals, tt.wantErrors, tt.wantFatal)
			}
		})
	}
}

// TestRun: Run waits for ready, and its stop cancels run's context and
// reports run's error once; a run that returns before it is ready fails
// the test at once.
func TestRun(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name                  string
		early                 bool  // run returns before it is ready
		err                   error // what run returns once canceled
		wantErrors, wantFatal int
	}{
		{"clean stop", false, nil, 0, 0},
		{"error at stop", false, boom, 1, 0},
		{"returns before ready", true, boom, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			ready := make(chan struct{})
			canceled := false
			stop := Run(r, context.Background(), "run", ready, func(ctx context.Context) error {
				if tt.early {
					return tt.err
				}
				close(ready)
				<-ctx.Done()
				canceled = true
				return tt.err
			})
			stop()
			stop()
			if !tt.early && !canceled {
				t.Error("stop returned before run saw its context end")
			}
			if r.errors != tt.wantErrors || r.fatals != tt.wantFatal {
				t.Errorf("errors, fatals = %d, %d; want %d, %d", r.errors, r.fatals, tt.wantErrors, tt.wantFatal)
			}
		})
	}
}

// TestMeshStateFirstBad: self on the diagonal, the first row and column
// failed, the rest ok.
func TestMeshStateFirstBad(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{0, ""}, {1, "s"}, {2, "sffs"}, {3, "sfffsofos"}} {
		if got := MeshStateFirstBad(tt.n); got != tt.want {
			t.Errorf("MeshStateFirstBad(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestStartGroup: the process leads a group of its own, and its exit
// status arrives on the channel.
func TestStartGroup(t *testing.T) {
	for _, tt := range []struct {
		name    string
		script  string
		wantErr bool
	}{{"exit 0", "exit 0", false}, {"exit 3", "exit 3", true}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", "sleep 0.01; "+tt.script)
			done := StartGroup(t, cmd)
			if pgid, err := syscall.Getpgid(cmd.Process.Pid); err == nil && pgid != cmd.Process.Pid {
				t.Errorf("process group %d, want its own (%d)", pgid, cmd.Process.Pid)
			}
			if err := <-done; (err != nil) != tt.wantErr {
				t.Errorf("wait = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestNear: a relative tolerance, absolute near zero.
func TestNear(t *testing.T) {
	for _, tt := range []struct {
		a, b, rel float64
		want      bool
	}{
		{1, 1, 0, true},
		{1e6, 1e6 + 0.5, 1e-6, true},
		{1e6, 1e6 + 2, 1e-6, false},
		{0, 1e-19, 1e-6, true},
		{0, 1e-17, 1e-6, false},
		{-3, 3, 2, true},
		{-3, 3, 1.9, false},
	} {
		if got := Near(tt.a, tt.b, tt.rel); got != tt.want {
			t.Errorf("Near(%g, %g, %g) = %v, want %v", tt.a, tt.b, tt.rel, got, tt.want)
		}
	}
}

// TestMicros: fractions of a microsecond are kept to the nanosecond.
func TestMicros(t *testing.T) {
	for _, tt := range []struct {
		n    float64
		want time.Duration
	}{{0, 0}, {1, time.Microsecond}, {2.5, 2500 * time.Nanosecond}, {-1, -time.Microsecond}} {
		if got := Micros(tt.n); got != tt.want {
			t.Errorf("Micros(%g) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// WaitGone returns once a killed process is gone (reaped or a zombie),
// and Logger's lines reach its buffer without t.Log (a passing test
// prints nothing).
func TestWaitGoneAndLogger(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !ProcAlive(pid) {
		t.Fatalf("ProcAlive(%d) = false for a running sleep", pid)
	}
	_ = cmd.Process.Kill()
	go func() { _ = cmd.Wait() }()
	WaitGone(t, 0, []int{pid})
	if ProcAlive(pid) {
		t.Fatalf("WaitGone returned while %d runs", pid)
	}
	Logger(t).Debug("kept", "k", 1) // must not panic, nor print
}

// TestClock: Now stands still until Add moves it, by exactly what was
// added, back as well as forward, from several goroutines at once.
func TestClock(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		adds  []time.Duration
		tasks int
		want  time.Time
	}{
		{"still", nil, 1, start},
		{"forward", []time.Duration{time.Second, time.Minute}, 1, start.Add(61 * time.Second)},
		{"back", []time.Duration{-time.Hour}, 1, start.Add(-time.Hour)},
		{"concurrent", []time.Duration{time.Millisecond}, 50, start.Add(50 * time.Millisecond)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock(start)
			if got := c.Now(); !got.Equal(start) {
				t.Fatalf("Now = %v before any Add, want %v", got, start)
			}
			var wg sync.WaitGroup
			for range tt.tasks {
				wg.Go(func() {
					for _, d := range tt.adds {
						c.Add(d)
						_ = c.Now()
					}
				})
			}
			wg.Wait()
			if got := c.Now(); !got.Equal(tt.want) {
				t.Errorf("Now = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTokenFile: the file holds the token and a newline, is readable by
// its owner only, and each call gets a file of its own.
func TestTokenFile(t *testing.T) {
	a, b := TokenFile(t, "s3cret"), TokenFile(t, "other")
	if a == b {
		t.Fatalf("two calls share %s", a)
	}
	for f, want := range map[string]string{a: "s3cret\n", b: "other\n"} {
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s holds %q, want %q", f, got, want)
		}
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, mode)
		}
	}
}
