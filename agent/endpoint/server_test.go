package endpoint_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/agent/endpoint"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
)

// helperEnv, when set, makes the test binary an endpoint process: it
// dials the socket the variable names until SIGTERM.
const helperEnv = "MESHPERF_TEST_ENDPOINT_SOCKET"

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := endpoint.Dial(ctx, endpoint.ClientConfig{
			Socket: sock, Hello: endpoint.Hello{Node: os.Getenv("NODE_NAME"), Version: "test"},
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		})
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// podNS creates a throwaway namespace; with ip set, a veth pair inside it
// (both ends in the namespace) carries ip/24 on one end.
func podNS(t *testing.T, ip string) string {
	t.Helper()
	path := testnet.NewNetNS(t, "mp-ep")
	if ip == "" {
		return path
	}
	name := filepath.Base(path)
	for _, argv := range [][]string{
		{"ip", "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0"},
		{"ip", "-n", name, "addr", "add", ip + "/24", "dev", "eth0"},
		{"ip", "-n", name, "link", "set", "eth0", "up"},
		{"ip", "-n", name, "link", "set", "peer0", "up"},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	return path
}

// startEndpoint runs this test binary as an endpoint process inside the
// namespace at nsPath, in its own process group; the test's end stops it
// with SIGTERM and checks that it exits cleanly.
func startEndpoint(t *testing.T, nsPath, sock, node string) (cmd *exec.Cmd, logs func() string) {
	t.Helper()
	cmd = exec.Command("nsenter", "--net="+nsPath, "--", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+sock, "NODE_NAME="+node)
	out := &testutil.SyncBuffer{}
	cmd.Stderr = out
	done := testutil.StartGroup(t, cmd)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "killed") {
				t.Errorf("endpoint exit after SIGTERM: %v\n%s", err, out.String())
			}
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done //nolint:errcheck // waits for it to end: killed here, its error is the kill's
			t.Errorf("endpoint ignored SIGTERM\n%s", out.String())
		}
	})
	return cmd, out.String
}

// serve starts a server on a socket in a temporary directory.
func serve(t *testing.T, node string) (*endpoint.Server, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "endpoint.sock")
	s, err := endpoint.Listen(endpoint.ServerConfig{Path: sock, NodeName: node, HelloTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket file left after Serve: %v", err)
		}
	})
	return s, sock
}

// waitPod waits until Acquire returns a pod with IP want (invalid: none).
func waitPod(t *testing.T, s *endpoint.Server, want netip.Addr) *endpoint.Pod {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := s.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		if p != nil && p.IP == want {
			t.Cleanup(func() { _ = p.NetNS.Close() })
			return p
		}
		if p == nil && !want.IsValid() {
			return nil
		}
		if p != nil {
			_ = p.NetNS.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod endpoint: got %v, want %v", p, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameNS reports whether the file and the path are one namespace.
func sameNS(t *testing.T, f *os.File, path string) bool {
	t.Helper()
	var a, b syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(path, &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// hello dials sock from this process (the agent's own namespace) and
// returns the agent's reply.
func hello(t *testing.T, sock string, h endpoint.Hello) endpoint.Reply {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := json.Marshal(h)
	if _, err := c.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	var r endpoint.Reply
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return r
}

// TestAdmission: an endpoint in a pod namespace with an IPv4 address is
// admitted with that address and namespace; one in the agent's own
// namespace, one whose namespace has no IPv4 and one naming another node
// are refused, and leave no pod endpoint.
func TestAdmission(t *testing.T) {
	tests := []struct {
		name     string
		podIP    string // "" : a namespace with lo only
		own      bool   // dial from the agent's namespace (this process)
		node     string // the hello's node name
		wantIP   string // "": refused
		wantErrs string // in the refusal
	}{
		{name: "pod namespace", podIP: "192.0.2.10", node: "node-a", wantIP: "192.0.2.10"},
		{name: "no node name in hello", podIP: "192.0.2.11", wantIP: "192.0.2.11"},
		{name: "agent's own namespace", own: true, wantErrs: "agent's own network namespace"},
		{name: "no IPv4", podIP: "", wantErrs: "no global IPv4"},
		{name: "another node", podIP: "192.0.2.12", node: "node-b", wantErrs: "another node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, sock := serve(t, "node-a")
			if tc.own {
				got := hello(t, sock, endpoint.Hello{Node: tc.node})
				if got.OK || !strings.Contains(got.Error, tc.wantErrs) {
					t.Errorf("reply %+v, want a refusal with %q", got, tc.wantErrs)
				}
				waitPod(t, s, netip.Addr{})
				return
			}
			ns := podNS(t, tc.podIP)
			if tc.wantIP == "" {
				// Refused: the endpoint retries, and logs each refusal.
				_, logs := startEndpoint(t, ns, sock, tc.node)
				deadline := time.Now().Add(10 * time.Second)
				for !strings.Contains(logs(), tc.wantErrs) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if !strings.Contains(logs(), tc.wantErrs) {
					t.Errorf("endpoint log lacks %q:\n%s", tc.wantErrs, logs())
				}
				waitPod(t, s, netip.Addr{})
				return
			}
			cmd, _ := startEndpoint(t, ns, sock, tc.node)
			p := waitPod(t, s, netip.MustParseAddr(tc.wantIP))
			if !sameNS(t, p.NetNS, ns) {
				t.Errorf("pod namespace descriptor is not %s", ns)
			}
			if !sameNS(t, p.NetNS, p.NetNSPath()) {
				t.Errorf("NetNSPath %s does not name the pod namespace", p.NetNSPath())
			}
			// nsenter's PID: it execs the endpoint.
			if p.PID != cmd.Process.Pid {
				t.Errorf("PID %d, want %d", p.PID, cmd.Process.Pid)
			}
		})
	}
}

// TestNewestWinsAndWithdraw: a second endpoint replaces the first (whose
// connection the agent closes); when the endpoint goes, the pod endpoint is
// withdrawn, and a new one (a restarted pod) is admitted.
func TestNewestWinsAndWithdraw(t *testing.T) {
	s, sock := serve(t, "node-a")
	first, _ := startEndpoint(t, podNS(t, "192.0.2.21"), sock, "node-a")
	waitPod(t, s, netip.MustParseAddr("192.0.2.21"))
	drain(s)
	second, _ := startEndpoint(t, podNS(t, "192.0.2.22"), sock, "node-a")
	p := waitPod(t, s, netip.MustParseAddr("192.0.2.22"))
	if p.PID != second.Process.Pid {
		t.Errorf("PID %d, want the second endpoint's %d", p.PID, second.Process.Pid)
	}
	waitChange(t, s)
	// The first, replaced, waits its longest backoff (200 ms) and comes
	// back: the newest wins again.
	p = waitPod(t, s, netip.MustParseAddr("192.0.2.21"))
	if p.PID != first.Process.Pid {
		t.Errorf("PID %d, want the first endpoint's %d", p.PID, first.Process.Pid)
	}
	// Both gone: withdrawn.
	_ = syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-second.Process.Pid, syscall.SIGKILL)
	waitPod(t, s, netip.Addr{})
	// A restarted pod.
	startEndpoint(t, podNS(t, "192.0.2.23"), sock, "node-a")
	waitPod(t, s, netip.MustParseAddr("192.0.2.23"))
}

// drain takes a pending change signal, if any.
func drain(s *endpoint.Server) {
	select {
	case <-s.Changes():
	default:
	}
}

// waitChange waits for a change signal.
func waitChange(t *testing.T, s *endpoint.Server) {
	t.Helper()
	select {
	case <-s.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled")
	}
}

// TestStaleSocket: Listen removes a socket nobody listens on, and refuses
// to remove a file that is not a socket or a socket in use.
func TestStaleSocket(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		wantErr string // "": Listen succeeds
	}{
		{"nothing there", func(*testing.T, string) {}, ""},
		{"stale socket", func(t *testing.T, path string) {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			_ = l.Close()
		}, ""},
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a socket"},
		{"socket in use", func(t *testing.T, path string) {
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
		}, "in use"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "endpoint.sock")
			tc.prepare(t, path)
			s, err := endpoint.Listen(endpoint.ServerConfig{Path: path})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Listen: %v, want an error with %q", err, tc.wantErr)
				}
				if _, err := os.Lstat(path); err != nil {
					t.Errorf("the file was removed: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o660 {
				t.Errorf("socket mode %v, want 0660", got)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.Serve(ctx); err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

// TestResolveVanished: a PID that exited is refused as vanished.
func TestResolveVanished(t *testing.T) {
	testnet.NeedTools(t, "true")
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	s, _ := serve(t, "")
	if err := s.Resolve(cmd.Process.Pid); !errors.Is(err, endpoint.ErrVanished) {
		t.Errorf("Resolve(exited pid): %v, want ErrVanished", err)
	}
	if err := s.Resolve(os.Getpid()); !errors.Is(err, endpoint.ErrHostNamespace) {
		t.Errorf("Resolve(own pid): %v, want ErrHostNamespace", err)
	}
}
