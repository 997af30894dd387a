package agent_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// TestMain fails the package if a goroutine (a session, a server reaper,
// a gRPC stream) outlives the tests.
func TestMain(m *testing.M) {
	if sock := os.Getenv(endpointHelperEnv); sock != "" {
		runEndpointHelper(sock)
		return
	}
	goleak.VerifyTestMain(m)
}

// The tests send traffic only to 127.0.0.0/8 in the root namespace.

// startAgent runs agent.Run until the test ends; the returned channel
// gets Run's error.
func startAgent(t *testing.T, cfg agent.Config) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(testnet.Ctx(t, 2*time.Minute))
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- agent.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			t.Errorf("agent %s did not return within 30 s of its context's end", cfg.NodeName)
		}
	})
	return errc
}

// fakeCoordinator serves AgentService on a unix socket; connect runs each
// agent session.
type fakeCoordinator struct {
	agentv1.UnimplementedAgentServiceServer
	connect func(grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error
}

func (f *fakeCoordinator) Connect(s grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error {
	return f.connect(s)
}

// startFake starts a fake coordinator and returns the agents' target.
func startFake(t *testing.T, connect func(grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentv1.RegisterAgentServiceServer(g, &fakeCoordinator{connect: connect})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(l)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return "unix://" + sock
}

// baseConfig is an agent on 127.0.0.1 with fresh ports and a fast
// reconnect.
func baseConfig(t *testing.T, coordinator, node string) agent.Config {
	t.Helper()
	return agent.Config{
		Coordinator:  coordinator,
		NodeName:     node,
		HostIP:       netip.MustParseAddr("127.0.0.1"),
		HTTPPort:     testnet.FreePort(t),
		Ports:        servers.Ports{Iperf3: testnet.FreePort(t), Qperf: testnet.FreePort(t), QperfData: testnet.FreePort(t)},
		ReconnectMin: 20 * time.Millisecond,
		ReconnectMax: 200 * time.Millisecond,
	}
}

// serverPIDs lists the live iperf3 and qperf processes whose port
// argument is one of ports: the servers of this test and nobody else's.
func serverPIDs(ports ...uint32) []int {
	want := make([]string, len(ports))
	for i, p := range ports {
		want[i] = strconv.Itoa(int(p))
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if tool := filepath.Base(argv[0]); tool != "iperf3" && tool != "qperf" {
			continue
		}
		for i := 1; i+1 < len(argv); i++ {
			if (argv[i] == "-p" || argv[i] == "-lp") && slices.Contains(want, argv[i+1]) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// alive reports whether pid runs; a zombie is dead.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// noServersLeft fails the test if a server on ports outlives it (after a
// moment for SIGKILL to land), and kills it.
func noServersLeft(t *testing.T, ports ...uint32) {
	t.Helper()
	var left []int
	ok := poll(15*time.Second, func() bool {
		left = serverPIDs(ports...)
		return len(left) == 0
	})
	if !ok {
		t.Errorf("servers %v still run on ports %v", left, ports)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// poll checks cond until it holds or the limit passes; the limit only
// turns a hang into a failure.
func poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// logBuffer collects an agent's log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureLogs sends cfg's log, at every level, to the returned buffer.
func captureLogs(cfg *agent.Config) *logBuffer {
	b := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return b
}
