package servers_test

import (
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// newLingerFixture is newFixture (host network only) with the given
// LingerMax and LingerIdle.
func newLingerFixture(t *testing.T, lingerMax, lingerIdle time.Duration) *fixture {
	t.Helper()
	testnet.Need(t, "iperf3", "qperf")
	f := &fixture{
		ports: servers.Ports{Iperf3: testnet.FreePort(t), Qperf: testnet.FreePort(t), QperfData: testnet.FreePort(t)},
		ns:    map[measurev1.Network]string{host: ""},
	}
	f.m = servers.New(servers.Config{NetNS: f.ns, Ports: f.ports, LingerMax: lingerMax, LingerIdle: lingerIdle})
	t.Cleanup(func() {
		f.m.StopAll()
		if n := f.m.Running(); n != 0 {
			t.Errorf("Running() = %d after StopAll", n)
		}
		testutil.WaitGone(t, 0, f.serverPIDs())
	})
	return f
}

// start starts tool's server for workID on the host network, and returns
// its processes.
func (f *fixture) start(t *testing.T, workID string, tool measurev1.Tool) []int {
	t.Helper()
	before := f.serverPIDs()
	if _, err := f.m.Start(testnet.Ctx(t, time.Minute), workID, tool, host); err != nil {
		t.Fatalf("Start %s: %v", workID, err)
	}
	var pids []int
	for _, pid := range f.serverPIDs() {
		if !slices.Contains(before, pid) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("Start %s: no server process", workID)
	}
	return pids
}

// TestLingerIdle: a lingering server that no client connects to is
// stopped once it has been idle for LingerIdle (the bound is far).
func TestLingerIdle(t *testing.T) {
	f := newLingerFixture(t, time.Hour, 300*time.Millisecond)
	pids := f.start(t, "t1", qperf)
	f.m.Linger()
	if n := f.m.Lingering(); n != 1 {
		t.Errorf("Lingering() = %d after Linger, want 1", n)
	}
	testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the idle lingering server to be stopped", func() bool { return f.m.Running() == 0 })
	testutil.WaitGone(t, 0, pids)
}

// TestLingerBound: a lingering server that is serving (a connection to it
// stays open) is stopped at LingerMax (LingerIdle is far).
func TestLingerBound(t *testing.T) {
	f := newLingerFixture(t, 500*time.Millisecond, time.Hour)
	pids := f.start(t, "t1", qperf)
	c, err := f.dial(t, host, f.ports.Qperf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	f.m.Linger()
	testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the lingering server to be stopped at its bound", func() bool { return f.m.Running() == 0 })
	testutil.WaitGone(t, 0, pids)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the client's connection is still open after its server was stopped: %v", err)
	}
}

// TestLingerYields: a Start that needs a lingering server's port stops
// that server and starts its own; a server that does not linger keeps its
// port (busy).
func TestLingerYields(t *testing.T) {
	for _, tool := range []measurev1.Tool{iperf3, qperf} {
		t.Run(tool.String(), func(t *testing.T) {
			f := newLingerFixture(t, time.Hour, time.Hour)
			old := f.start(t, "old", tool)
			if _, err := f.m.Start(testnet.Ctx(t, time.Minute), "busy", tool, host); !errors.Is(err, servers.ErrBusy) {
				t.Errorf("Start on a running (not lingering) server's port = %v, want ErrBusy", err)
			}
			f.m.Linger()
			f.start(t, "new", tool)
			testutil.WaitGone(t, 0, old)
			if err := f.m.Stop("old"); !errors.Is(err, servers.ErrUnknown) {
				t.Errorf("Stop of the server that yielded = %v, want ErrUnknown", err)
			}
			if n, l := f.m.Running(), f.m.Lingering(); n != 1 || l != 0 {
				t.Errorf("Running() = %d, Lingering() = %d; want the new server only, not lingering", n, l)
			}
		})
	}
}

// TestLingerStop: Stop for a lingering server's test stops it, StopAll
// stops every lingering server, and Linger stops nothing at once.
func TestLingerStop(t *testing.T) {
	f := newLingerFixture(t, time.Hour, time.Hour)
	q := f.start(t, "q", qperf)
	i := f.start(t, "i", iperf3)
	f.m.Linger()
	if n, l := f.m.Running(), f.m.Lingering(); n != 2 || l != 2 {
		t.Errorf("after Linger: Running() = %d, Lingering() = %d; want 2 and 2", n, l)
	}
	for _, pid := range append(q, i...) {
		if !testutil.ProcAlive(pid) {
			t.Errorf("server process %d ended at Linger", pid)
		}
	}
	if err := f.m.Stop("q"); err != nil {
		t.Errorf("Stop of a lingering server: %v", err)
	}
	testutil.WaitGone(t, 0, q)
	f.m.StopAll()
	testutil.WaitGone(t, 0, i)
	if n := f.m.Running(); n != 0 {
		t.Errorf("Running() = %d after StopAll", n)
	}
}
