package netns_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/testnet"
)

// TestMain fails the package if a test's server goroutine outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nsID identifies a namespace file, failing t if it cannot.
func nsID(t *testing.T, path string) netns.ID {
	t.Helper()
	id, err := netns.IDOf(path)
	if err != nil {
		t.Fatalf("IDOf(%s): %v", path, err)
	}
	return id
}

// serveBanner accepts on l and writes banner to every connection until l
// is closed.
func serveBanner(t *testing.T, l net.Listener, banner string) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, banner)
			_ = c.Close()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
}

// fetch dials addr and returns what the server wrote.
func fetch(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// TestListenInNamespace: a socket opened in a namespace is reachable from
// inside it and not from the root namespace's loopback.
func TestListenInNamespace(t *testing.T) {
	path := testnet.NewNetNS(t, "mp-ns")
	for _, network := range []string{"tcp", "tcp4"} {
		t.Run(network, func(t *testing.T) {
			l, err := netns.Listen(path, network, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serveBanner(t, l, "inside")
			addr := l.Addr().String()

			var got string
			if err := netns.Do(path, func() error {
				var err error
				got, err = fetch(addr)
				return err
			}); err != nil {
				t.Fatalf("dial %s inside the namespace: %v", addr, err)
			}
			if got != "inside" {
				t.Errorf("inside the namespace, %s answered %q, want %q", addr, got, "inside")
			}

			// From the root namespace the port is either closed or someone
			// else's: never our listener.
			got, err = fetch(addr)
			if err == nil && got == "inside" {
				t.Errorf("the namespace's listener %s is reachable from the root namespace", addr)
			}
		})
	}
}

// TestListenOwnNamespace: an empty path listens where the caller is, and
// the same port can then be bound again inside another namespace.
func TestListenOwnNamespace(t *testing.T) {
	path := testnet.NewNetNS(t, "mp-ns")
	root, err := netns.Listen("", "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveBanner(t, root, "root")
	addr := root.Addr().String()
	inside, err := netns.Listen(path, "tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s in the namespace while the root namespace holds it: %v", addr, err)
	}
	serveBanner(t, inside, "inside")

	if got, err := fetch(addr); err != nil || got != "root" {
		t.Errorf("from the root namespace %s answered %q, %v; want %q", addr, got, err, "root")
	}
	var got string
	err = netns.Do(path, func() error {
		var err error
		got, err = fetch(addr)
		return err
	})
	if err != nil || got != "inside" {
		t.Errorf("inside the namespace %s answered %q, %v; want %q", addr, got, err, "inside")
	}
}

// TestDoRestoresThread: the thread that ran fn is back in its namespace
// afterwards, whether fn failed or not, and no thread of the process is
// left in the namespace.
func TestDoRestoresThread(t *testing.T) {
	path := testnet.NewNetNS(t, "mp-ns")
	target := nsID(t, path)
	errFn := errors.New("fn failed")
	for _, fnErr := range []error{nil, errFn} {
		t.Run(fmt.Sprint("fn returns ", fnErr), func(t *testing.T) {
			// Lock, so that before and after are the same thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			before := nsID(t, "/proc/thread-self/ns/net")
			if before == target {
				t.Fatal("the test already runs in the throwaway namespace")
			}
			var during netns.ID
			err := netns.Do(path, func() error {
				during = nsID(t, "/proc/thread-self/ns/net")
				return fnErr
			})
			if !errors.Is(err, fnErr) || (fnErr == nil) != (err == nil) {
				t.Errorf("Do = %v, want %v", err, fnErr)
			}
			if during != target {
				t.Errorf("fn ran in namespace %v, want %v (%s)", during, target, path)
			}
			if after := nsID(t, "/proc/thread-self/ns/net"); after != before {
				t.Errorf("thread in namespace %v after Do, want %v", after, before)
			}
		})
	}

	// Many calls from goroutines that do not lock their thread: afterwards
	// every thread of the process is where the process is.
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_ = netns.Do(path, func() error {
				runtime.Gosched()
				return nil
			})
		})
	}
	wg.Wait()
	want := nsID(t, "/proc/self/ns/net")
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		p := filepath.Join("/proc/self/task", task.Name(), "ns/net")
		got, err := netns.IDOf(p)
		if err != nil {
			continue // the thread exited meanwhile
		}
		if got != want {
			t.Errorf("thread %s is in namespace %v, want %v", task.Name(), got, want)
		}
	}
}

// TestBadPath: errors name the path, and the caller stays where it was.
func TestBadPath(t *testing.T) {
	notNS := filepath.Join(t.TempDir(), "not-a-netns")
	if err := os.WriteFile(notNS, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"missing", "/run/netns/mp-no-such-namespace"},
		{"not a namespace", notNS},
		{"another kind of namespace", "/proc/self/ns/uts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			before := nsID(t, "/proc/thread-self/ns/net")
			l, err := netns.Listen(tt.path, "tcp", "127.0.0.1:0")
			if err == nil {
				_ = l.Close()
				t.Fatalf("Listen in %s succeeded, want an error", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("Listen error %q does not name %s", err, tt.path)
			}
			ran := false
			err = netns.Do(tt.path, func() error { ran = true; return nil })
			if err == nil || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("Do error %v does not name %s", err, tt.path)
			}
			if ran {
				t.Error("fn ran although the namespace could not be entered")
			}
			if after := nsID(t, "/proc/thread-self/ns/net"); after != before {
				t.Errorf("thread in namespace %v after a failed call, want %v", after, before)
			}
		})
	}
}

// TestListenErrorInside: a listen that fails inside the namespace (the
// port is taken there) names the namespace too.
func TestListenErrorInside(t *testing.T) {
	path := testnet.NewNetNS(t, "mp-ns")
	l, err := netns.Listen(path, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	l2, err := netns.Listen(path, "tcp", l.Addr().String())
	if err == nil {
		_ = l2.Close()
		t.Fatalf("second listen on %s in %s succeeded", l.Addr(), path)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %v, want EADDRINUSE", err)
	}
	for _, want := range []string{path, l.Addr().String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
