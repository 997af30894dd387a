package webui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium (make test-deps installs it).
const chromiumPath = "/usr/bin/chromium"

// Viewport is the browser window's size in CSS pixels: the screenshots'
// size.
const viewportW, viewportH = 1280, 800

// requireChromium skips the test without chromium.
func requireChromium(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		tb.Skipf("missing tool: %s (make test-deps installs it): %v", chromiumPath, err)
	}
}

// browser is one chromium process, headless, with a fresh user data
// directory, in a process group of its own that is killed with everything
// in it when the test ends.
type browser struct {
	// ctx is the browser's first tab; tabs opened with tab share the
	// process.
	ctx     context.Context
	dataDir string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// startBrowser starts chromium; the whole browser lives at most life. It
// is stopped, and checked gone, at the test's cleanup.
func startBrowser(tb testing.TB, life time.Duration) *browser {
	tb.Helper()
	requireChromium(tb)
	dataDir, err := os.MkdirTemp("", "meshperf-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	b := &browser{dataDir: dataDir}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(dataDir),
		chromedp.WindowSize(viewportW, viewportH),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			b.mu.Lock()
			b.cmd = cmd
			b.mu.Unlock()
		}),
	}
	lifeCtx, cancelLife := context.WithTimeout(context.Background(), life)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(lifeCtx, opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b.ctx = ctx
	tb.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		cancelLife()
		b.kill()
		if left := processesUsing(dataDir); len(left) > 0 {
			tb.Errorf("chromium processes left with --user-data-dir=%s: %v", dataDir, left)
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.RemoveAll(dataDir)
	})
	// The first action starts the process, bound to lifeCtx.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	return b
}

// kill sends SIGKILL to the browser's process group and waits (5 s at
// most) until no process uses its user data directory.
func (b *browser) kill() {
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesUsing(b.dataDir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// processesUsing lists the processes (not zombies) with
// --user-data-dir=dir on their command line, as `pgrep -f` would.
func processesUsing(dir string) []int {
	want := []byte("--user-data-dir=" + dir)
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
			if bytes.Equal(arg, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// tab is one browser tab that records every console error, uncaught
// exception, browser log error and request to a host other than
// 127.0.0.1 from its first event on.
type tab struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

// newTab opens a tab in b whose actions must all end within timeout; it
// is closed at the test's cleanup.
func (b *browser) newTab(tb testing.TB, timeout time.Duration) *tab {
	tb.Helper()
	tt := &tab{}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithListener(tt.listen))
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	tt.ctx = ctx
	tb.Cleanup(func() { cancelT(); cancel() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewportW, viewportH)); err != nil {
		tb.Fatalf("open a tab: %v", err)
	}
	return tt
}

// listen runs in the tab's event loop: it only records.
func (tt *tab) listen(ev any) {
	var p string
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			var args []string
			for _, a := range e.Args {
				args = append(args, remoteText(a))
			}
			p = "console.error: " + strings.Join(args, " ")
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		p = fmt.Sprintf("uncaught exception: %s", d.Text)
		if d.Exception != nil {
			p += " " + d.Exception.Description
		}
		p += fmt.Sprintf(" (%s:%d)", d.URL, d.LineNumber+1)
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			p = fmt.Sprintf("browser log error (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		if u, err := url.Parse(e.Request.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "ws" || u.Scheme == "wss") && u.Hostname() != "127.0.0.1" {
			p = "request off loopback: " + e.Request.URL
		}
	}
	if p != "" {
		tt.mu.Lock()
		tt.problems = append(tt.problems, p)
		tt.mu.Unlock()
	}
}

func remoteText(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	if len(o.Value) > 0 {
		if s, err := strconv.Unquote(string(o.Value)); err == nil {
			return s
		}
		return string(o.Value)
	}
	return o.Description
}

// takeProblems returns the problems recorded since the last call.
func (tt *tab) takeProblems() []string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	p := tt.problems
	tt.problems = nil
	return p
}

// readyJS is true once the page has rendered its data.
const readyJS = `document.body && document.body.getAttribute("data-ready") === "1"`

// load navigates to u, waits (within wait) until the page has rendered its
// data, and returns the time from the navigation's start to that.
func (tt *tab) load(u string, wait time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if err := chromedp.Do(tt.ctx, chromedp.Navigate(u)); err != nil {
		return 0, fmt.Errorf("navigate to %s: %w", u, err)
	}
	if err := tt.waitReady(wait); err != nil {
		return 0, fmt.Errorf("%s: %w", u, err)
	}
	return time.Since(t0), nil
}

// errNotReady is waitReady's error when the page never set data-ready.
var errNotReady = errors.New(`body[data-ready="1"] never set`)

// waitReady polls until the page has rendered its data, at most wait.
func (tt *tab) waitReady(wait time.Duration) error {
	if err := tt.waitJS(readyJS, wait); err != nil {
		msg, _ := evalJS[string](tt, `(document.getElementById("error") || {}).textContent || ""`)
		return fmt.Errorf("%w within %v (#error: %q): %v", errNotReady, wait, strings.TrimSpace(msg), err) //nolint:errorlint // the sentinel decides errors.Is; the cause is text only
	}
	return nil
}

// waitJS evaluates expr every 100 ms until it is true, at most wait; an
// evaluation that fails (the page is navigating) is tried again.
func (tt *tab) waitJS(expr string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		ok, err := evalJS[bool](tt, "!!("+expr+")")
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not true within %v (last error: %v)", expr, wait, err) //nolint:errorlint // the last poll's error, nil when the poll succeeded, is context, not the cause
		}
		if err := chromedp.Do(tt.ctx, chromedp.Sleep(100*time.Millisecond)); err != nil {
			return err
		}
	}
}

// evalJS evaluates expr in the page and decodes its value as T.
func evalJS[T any](tt *tab, expr string) (T, error) {
	return chromedp.Run(tt.ctx, chromedp.Evaluate[T](expr))
}

// evalJSAwait is evalJS for an expression whose value is a promise: it
// decodes what the promise resolves to.
func evalJSAwait[T any](tt *tab, expr string) (T, error) {
	return chromedp.Run(tt.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// screenshot writes the whole page as PNG to dir/name.png and returns the
// path.
func (tt *tab) screenshot(dir, name string) (string, error) {
	png, err := chromedp.Run(tt.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "", fmt.Errorf("screenshot %s: %w", name, err)
	}
	p := filepath.Join(dir, name+".png")
	return p, os.WriteFile(p, png, 0o644)
}

// viewportShot writes the visible viewport (viewportW x viewportH) as PNG
// to path: the README's screenshots stay small.
func (tt *tab) viewportShot(path string) error {
	png, err := chromedp.Run(tt.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return fmt.Errorf("screenshot %s: %w", path, err)
	}
	return os.WriteFile(path, png, 0o644)
}
