package servers_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestMain fails the package if a reaper or process waiter outlives the
// tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	host   = measurev1.Network_NETWORK_HOST
	pod    = measurev1.Network_NETWORK_POD
	iperf3 = measurev1.Tool_TOOL_IPERF3
	qperf  = measurev1.Tool_TOOL_QPERF
)

// fixture is a Manager on fresh ports serving the host network and, if
// asked, a throwaway namespace as the pod network.
type fixture struct {
	m     *servers.Manager
	ports servers.Ports
	ns    map[measurev1.Network]string
}

func newFixture(t *testing.T, withPod bool, lifetime time.Duration) *fixture {
	t.Helper()
	testnet.Need(t, "iperf3", "qperf")
	f := &fixture{
		ports: servers.Ports{Iperf3: testnet.FreePort(t), Qperf: testnet.FreePort(t), QperfData: testnet.FreePort(t)},
		ns:    map[measurev1.Network]string{host: ""},
	}
	if withPod {
		f.ns[pod] = testnet.NewNetNS(t, "mp-srv") // deleted after the servers are gone: cleanups run last-in first-out
	}
	f.m = servers.New(servers.Config{NetNS: f.ns, Ports: f.ports, MaxLifetime: lifetime})
	t.Cleanup(func() {
		f.m.StopAll()
		if n := f.m.Running(); n != 0 {
			t.Errorf("Running() = %d after StopAll", n)
		}
		testutil.WaitGone(t, 0, f.serverPIDs())
	})
	return f
}

func (f *fixture) port(tool measurev1.Tool) uint32 {
	if tool == iperf3 {
		return f.ports.Iperf3
	}
	return f.ports.Qperf
}

// serverPIDs lists the live iperf3 and qperf processes on this fixture's
// ports, in any namespace: the servers this test started, and only those.
func (f *fixture) serverPIDs() []int { return testutil.ToolServers(f.ports.Iperf3, f.ports.Qperf) }

// leader returns the one of pids that the Manager started (our child);
// the others are what it forked.
func (f *fixture) leader(t *testing.T, pids []int) int {
	t.Helper()
	for _, pid := range pids {
		if st, ok := testutil.ReadProcStat(pid); ok && st.PPID == os.Getpid() {
			return pid
		}
	}
	t.Fatalf("none of the server processes %v is a child of the test", pids)
	return 0
}

// in runs fn in network's namespace.
func (f *fixture) in(t *testing.T, network measurev1.Network, fn func() error) error {
	t.Helper()
	if f.ns[network] == "" {
		return fn()
	}
	return netns.Do(f.ns[network], fn)
}

func (f *fixture) dial(t *testing.T, network measurev1.Network, port uint32) (net.Conn, error) {
	var c net.Conn
	err := f.in(t, network, func() error {
		var err error
		c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
		return err
	})
	return c, err
}

func (f *fixture) listen(t *testing.T, network measurev1.Network, port uint32) (net.Listener, error) {
	return netns.Listen(f.ns[network], "tcp", fmt.Sprintf("127.0.0.1:%d", port))
}

func TestStartListensStop(t *testing.T) {
	for _, tool := range []measurev1.Tool{iperf3, qperf} {
		for _, network := range []measurev1.Network{host, pod} {
			t.Run(fmt.Sprintf("%v/%v", tool, network), func(t *testing.T) {
				f := newFixture(t, network == pod, 0)
				want := servers.Started{Port: f.port(tool)}
				if tool == qperf {
					want.DataPort = f.ports.QperfData
				}
				got, err := f.m.Start(testnet.Ctx(t, time.Minute), "t1", tool, network)
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				if got != want {
					t.Errorf("Start = %+v, want %+v", got, want)
				}
				// Listening already: no wait, no retry.
				c, err := f.dial(t, network, got.Port)
				if err != nil {
					t.Fatalf("connect right after Start: %v", err)
				}
				defer func() { _ = c.Close() }()
				if n := f.m.Running(); n != 1 {
					t.Errorf("Running() = %d, want 1", n)
				}
				// qperf forks a child per connection: Stop must take it too.
				pids := f.serverPIDs()
				if len(pids) == 0 {
					t.Fatal("no server process on the test's ports")
				}
				// The server waits for our connection to speak, so it is
				// still there for Stop.
				leader := f.leader(t, pids)
				if err := f.m.Stop("t1"); err != nil {
					t.Errorf("Stop: %v", err)
				}
				if testutil.ProcAlive(leader) {
					t.Errorf("server %d still runs after Stop returned", leader)
				}
				if n := f.m.Running(); n != 0 {
					t.Errorf("Running() = %d after Stop, want 0", n)
				}
				testutil.WaitGone(t, 0, pids)
				_ = c.Close()
				l, err := f.listen(t, network, got.Port)
				if err != nil {
					t.Fatalf("port %d is not free after Stop: %v", got.Port, err)
				}
				_ = l.Close()
				if err := f.m.Stop("t1"); !errors.Is(err, servers.ErrUnknown) {
					t.Errorf("second Stop = %v, want ErrUnknown", err)
				}
			})
		}
	}
}

func TestStartBusyAndDuplicate(t *testing.T) {
	f := newFixture(t, true, 0)
	ctx := testnet.Ctx(t, time.Minute)
	steps := []struct {
		name    string
		workID  string
		tool    measurev1.Tool
		network measurev1.Network
		wantErr error  // nil: success; errAny: any error
		wantIn  string // in the error message
	}{
		{"first", "a", qperf, host, nil, ""},
		{"same port and network", "b", qperf, host, servers.ErrBusy, `"a"`},
		{"same port, other network", "c", qperf, pod, nil, ""},
		{"same work ID, other network", "a", qperf, pod, errAny, `"a" already has a server`},
		{"same work ID, other tool", "a", iperf3, host, errAny, `"a" already has a server`},
		{"other tool on the busy network", "d", iperf3, host, nil, ""},
		{"then busy too", "e", iperf3, host, servers.ErrBusy, `"d"`},
	}
	running := 0
	for _, s := range steps {
		_, err := f.m.Start(ctx, s.workID, s.tool, s.network)
		switch {
		case s.wantErr == nil && err != nil:
			t.Fatalf("%s: Start(%s): %v", s.name, s.workID, err)
		case s.wantErr == nil:
			running++
		case err == nil:
			t.Fatalf("%s: Start(%s) succeeded, want an error", s.name, s.workID)
		case s.wantErr != errAny && !errors.Is(err, s.wantErr): //nolint:errorlint // errAny is the table's marker, compared by identity
			t.Errorf("%s: Start(%s) = %v, want %v", s.name, s.workID, err, s.wantErr)
		case s.wantErr == errAny && errors.Is(err, servers.ErrBusy): //nolint:errorlint // errAny is the table's marker, compared by identity
			t.Errorf("%s: Start(%s) = %v, want a duplicate error, not busy", s.name, s.workID, err)
		}
		if err != nil && !strings.Contains(err.Error(), s.wantIn) {
			t.Errorf("%s: error %q does not contain %s", s.name, err, s.wantIn)
		}
		if got := f.m.Running(); got != running {
			t.Errorf("%s: Running() = %d, want %d", s.name, got, running)
		}
	}
	pids := f.serverPIDs()
	if len(pids) != running {
		t.Errorf("server processes %v, want %d", pids, running)
	}
	f.m.StopAll()
	if left := slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !testutil.ProcAlive(pid) }); len(left) > 0 {
		t.Errorf("servers %v still run after StopAll returned", left)
	}
	if n := f.m.Running(); n != 0 {
		t.Errorf("Running() = %d after StopAll", n)
	}
	testutil.WaitGone(t, 0, pids)
	for _, id := range []string{"a", "c", "d"} {
		if err := f.m.Stop(id); !errors.Is(err, servers.ErrUnknown) {
			t.Errorf("Stop(%s) after StopAll = %v, want ErrUnknown", id, err)
		}
	}
}

var errAny = errors.New("any error")

// TestStartConcurrent checks that of several tests racing for one port,
// exactly one gets it.
func TestStartConcurrent(t *testing.T) {
	f := newFixture(t, false, 0)
	ctx := testnet.Ctx(t, time.Minute)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = f.m.Start(ctx, fmt.Sprintf("t%d", i), qperf, host) })
	}
	wg.Wait()
	ok, busy := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, servers.ErrBusy):
			busy++
		default:
			t.Errorf("Start: %v", err)
		}
	}
	if ok != 1 || busy != n-1 {
		t.Errorf("%d started, %d busy; want 1 and %d", ok, busy, n-1)
	}
	if got := len(f.serverPIDs()); got != 1 {
		t.Errorf("%d server processes, want 1", got)
	}
}

// TestStartNotReady: a server whose port another listener holds fails
// with the tool's own words, and leaves neither a process nor a
// reservation behind.
func TestStartNotReady(t *testing.T) {
	tests := []struct {
		tool     measurev1.Tool
		toolSays string
	}{
		{iperf3, "Address already in use"},
		{qperf, "unable to bind to listen port"},
	}
	for _, tt := range tests {
		t.Run(tt.tool.String(), func(t *testing.T) {
			f := newFixture(t, false, 0)
			l, err := f.listen(t, host, f.port(tt.tool))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.m.Start(testnet.Ctx(t, time.Minute), "t1", tt.tool, host)
			_ = l.Close()
			if !errors.Is(err, servers.ErrNotReady) {
				t.Fatalf("Start = %v, want ErrNotReady", err)
			}
			if !strings.Contains(err.Error(), tt.toolSays) {
				t.Errorf("error %q lacks the tool's message %q", err, tt.toolSays)
			}
			if n := f.m.Running(); n != 0 {
				t.Errorf("Running() = %d, want 0", n)
			}
			if pids := f.serverPIDs(); len(pids) != 0 {
				t.Errorf("server processes %v left", pids)
			}
			// Neither the port nor the work ID stays reserved.
			if _, err := f.m.Start(testnet.Ctx(t, time.Minute), "t1", tt.tool, host); err != nil {
				t.Fatalf("Start after the port was freed: %v", err)
			}
			if err := f.m.Stop("t1"); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

// TestStartCanceled: a Start whose context is already over does not leave
// a server or a reservation behind.
func TestStartCanceled(t *testing.T) {
	f := newFixture(t, false, 0)
	ctx, cancel := context.WithCancel(testnet.Ctx(t, time.Minute))
	cancel()
	_, err := f.m.Start(ctx, "t1", qperf, host)
	switch {
	case err == nil:
		// The server listened before Start looked at ctx: allowed.
		if err := f.m.Stop("t1"); err != nil {
			t.Errorf("Stop: %v", err)
		}
	case !errors.Is(err, servers.ErrNotReady) || !errors.Is(err, context.Canceled):
		t.Errorf("Start = %v, want ErrNotReady and context.Canceled", err)
	}
	if n := f.m.Running(); n != 0 {
		t.Errorf("Running() = %d, want 0", n)
	}
	testutil.WaitGone(t, 0, f.serverPIDs())
	if _, err := f.m.Start(testnet.Ctx(t, time.Minute), "t1", qperf, host); err != nil {
		t.Errorf("Start after a canceled one: %v", err)
	}
}

// TestIperf3OneShotReaped: iperf3 -1 exits after one test; the Manager
// forgets it and frees its port.
func TestIperf3OneShotReaped(t *testing.T) {
	f := newFixture(t, false, 0)
	st, err := f.m.Start(testnet.Ctx(t, time.Minute), "t1", iperf3, host)
	if err != nil {
		t.Fatal(err)
	}
	out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "iperf3", Args: []string{
		"-c", "127.0.0.1", "-p", strconv.Itoa(int(st.Port)), "-n", "1M", "--connect-timeout", "5000",
	}})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("iperf3 client: %v, exit %d: %s%s", err, out.ExitCode, out.Stdout, out.Stderr)
	}
	testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the one-shot server to be reaped", func() bool { return f.m.Running() == 0 })
	if pids := f.serverPIDs(); len(pids) != 0 {
		t.Errorf("server processes %v left after Running() dropped to 0", pids)
	}
	if err := f.m.Stop("t1"); !errors.Is(err, servers.ErrUnknown) {
		t.Errorf("Stop of a reaped server = %v, want ErrUnknown", err)
	}
	if _, err := f.m.Start(testnet.Ctx(t, time.Minute), "t2", iperf3, host); err != nil {
		t.Errorf("Start on the reaped server's port: %v", err)
	}
}

// TestLifetime: a server nobody stops is killed at the end of its lifetime.
func TestLifetime(t *testing.T) {
	f := newFixture(t, false, time.Second)
	if _, err := f.m.Start(testnet.Ctx(t, time.Minute), "t1", qperf, host); err != nil {
		t.Fatal(err)
	}
	pids := f.serverPIDs()
	if len(pids) != 1 {
		t.Fatalf("server processes %v, want one", pids)
	}
	testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the server to reach its lifetime", func() bool { return f.m.Running() == 0 })
	testutil.WaitGone(t, 0, pids)
	if _, err := f.m.Start(testnet.Ctx(t, time.Minute), "t2", qperf, host); err != nil {
		t.Errorf("Start after the lifetime ended: %v", err)
	}
}

func TestStartRefused(t *testing.T) {
	testnet.Need(t, "iperf3", "qperf")
	p := testnet.FreePort(t)
	tests := []struct {
		name    string
		ports   servers.Ports
		tool    measurev1.Tool
		network measurev1.Network
		wantErr error
		wantIn  string
	}{
		{"network not served", servers.Ports{Qperf: p, QperfData: p + 1}, qperf, pod, nil, "NETWORK_POD"},
		{"ping has no server", servers.Ports{}, measurev1.Tool_TOOL_PING, host, nil, "no server"},
		{"curl has no server", servers.Ports{}, measurev1.Tool_TOOL_CURL, host, nil, "no server"},
		{"qperf data port = listen port", servers.Ports{Qperf: p, QperfData: p}, qperf, host, runner.ErrBadPort, strconv.Itoa(int(p))},
		{"port above 65535", servers.Ports{Iperf3: 70000}, iperf3, host, runner.ErrBadPort, "70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := servers.New(servers.Config{NetNS: map[measurev1.Network]string{host: ""}, Ports: tt.ports})
			defer m.StopAll()
			_, err := m.Start(testnet.Ctx(t, time.Minute), "t1", tt.tool, tt.network)
			if err == nil {
				t.Fatal("Start succeeded, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Start = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error %q does not contain %q", err, tt.wantIn)
			}
			if n := m.Running(); n != 0 {
				t.Errorf("Running() = %d, want 0", n)
			}
		})
	}
}
