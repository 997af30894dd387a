package agent_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The tests here end a session (the fake coordinator goes away) while test
// servers run, as a coordinator killed mid-run does.

const (
	hostNet = measurev1.Network_NETWORK_HOST
	iperf3  = measurev1.Tool_TOOL_IPERF3
	qperf   = measurev1.Tool_TOOL_QPERF
)

// lingerAgent runs an agent with short linger limits that may send to
// 127.0.0.1, and accepts its first session.
func lingerAgent(t *testing.T, lingerMax, lingerIdle time.Duration) (cfg agent.Config, next func() *fakeSession, first *fakeSession, stop func()) {
	t.Helper()
	testnet.Need(t, "iperf3", "qperf")
	target, next := sessions(t)
	cfg = baseConfig(t, target, "node-a")
	cfg.ServerLingerMax, cfg.ServerLingerIdle = lingerMax, lingerIdle
	cfg.StateDir = t.TempDir()
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	t.Cleanup(func() { noServersLeft(t, cfg.Ports.Iperf3, cfg.Ports.Qperf) })
	stop = runAgent(t, cfg)
	first = next()
	first.accept(t, time.Second, 30*time.Second)
	return cfg, next, first, stop
}

// endSession ends fs from the coordinator's side and waits until the
// agent's side is over.
func endSession(t *testing.T, fs *fakeSession) {
	t.Helper()
	fs.end <- errors.New("coordinator gone")
	if !fs.closed() {
		t.Fatal("the agent did not end the session")
	}
}

// startOK orders tool's server for testID and fails the test unless it
// started.
func startOK(t *testing.T, fs *fakeSession, testID string, tool measurev1.Tool) *agentv1.ServerStarted {
	t.Helper()
	fs.send(t, work(testID, 10*time.Second, startServer(tool, hostNet)))
	r := fs.result(t, testID)
	if r.GetStatus() != measurev1.Status_STATUS_OK {
		t.Fatalf("start %v server for %s: %v %s", tool, testID, r.GetStatus(), r.GetMessage())
	}
	return r.GetServerStarted()
}

// established reports whether a TCP connection to port is established on
// this host (seen from the server's side: local port).
func established(port uint32) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if len(fields) > 3 && fields[3] == "01" && strings.HasSuffix(fields[1], want) {
				return true
			}
		}
	}
	return false
}

// TestServerLingersForItsClient: the session ends while a client is in the
// middle of its test against a server of the agent (here the same agent,
// on loopback); the server lingers, the client ends its test OK, and its
// result goes with the next session. The linger's idle limit (1 s) is well
// below the test (3 s): the server lingers because it serves, not for its
// grace. qperf with two message sizes runs two clients, one after the
// other, against the lingering server.
func TestServerLingersForItsClient(t *testing.T) {
	sec := durationpb.New(3 * time.Second)
	for _, tt := range []struct {
		name string
		tool measurev1.Tool
		spec *measurev1.TestSpec
	}{
		{"iperf3", iperf3, &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP,
			Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: sec}}}},
		{"qperf two sizes", qperf, &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_BW,
			Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: sec, MsgSizeBytes: []uint64{1024, 65536}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, next, fs, _ := lingerAgent(t, time.Minute, time.Second)
			st := startOK(t, fs, "r/t1", tt.tool)
			fs.send(t, work("r/t1", 30*time.Second, &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
				Spec: tt.spec, Network: hostNet, TargetIp: "127.0.0.1", Port: st.GetPort(), DataPort: st.GetDataPort(),
			}}))
			if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool { return established(st.GetPort()) }) {
				t.Fatal("the client did not connect to its server")
			}
			endSession(t, fs)

			fs = next()
			fs.accept(t, time.Second, 30*time.Second)
			r := fs.result(t, "r/t1") // from the spool, once the client is done
			if r.GetClientDone() == nil || r.GetStatus() != measurev1.Status_STATUS_OK {
				t.Fatalf("client result after the session's end: %v %q; want OK: its server lingers", r.GetStatus(), r.GetMessage())
			}
			if n, want := len(r.GetClientDone().GetResults()), max(len(tt.spec.GetQperf().GetMsgSizeBytes()), 1); n != want {
				t.Errorf("%d results, want %d", n, want)
			}
			for _, res := range r.GetClientDone().GetResults() {
				if res.GetStatus() != measurev1.Status_STATUS_OK {
					t.Errorf("result %v %q, want OK", res.GetStatus(), res.GetMessage())
				}
			}
		})
	}
}

// TestLingeringServerYields: servers that linger after a session's end
// (no client: they linger for their idle grace, here a minute) do not make
// the next session's start of the same tool busy: the lingering server
// yields its port. A StopServer of the next session for a test of the
// ended one stops its lingering server.
func TestLingeringServerYields(t *testing.T) {
	cfg, next, fs, _ := lingerAgent(t, time.Hour, time.Minute)
	startOK(t, fs, "r1/iperf3", iperf3)
	startOK(t, fs, "r1/qperf", qperf)
	oldIperf3, oldQperf := testutil.ToolServers(cfg.Ports.Iperf3), testutil.ToolServers(cfg.Ports.Qperf)
	if len(oldIperf3) == 0 || len(oldQperf) == 0 {
		t.Fatalf("server processes: iperf3 %v, qperf %v; want both", oldIperf3, oldQperf)
	}
	endSession(t, fs)

	fs = next()
	fs.accept(t, time.Second, 30*time.Second)
	for _, pid := range append(oldIperf3, oldQperf...) {
		if !testutil.ProcAlive(pid) {
			t.Errorf("server process %d did not linger after the session's end", pid)
		}
	}
	startOK(t, fs, "r2/iperf3", iperf3)
	if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool { return !testutil.ProcAlive(oldIperf3[0]) }) {
		t.Errorf("the lingering iperf3 server %v still runs after a new start took its port", oldIperf3)
	}
	fs.send(t, work("r1/qperf", 5*time.Second, &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}))
	if r := fs.result(t, "r1/qperf"); r.GetStatus() != measurev1.Status_STATUS_OK {
		t.Errorf("stop of the lingering qperf server: %v %s", r.GetStatus(), r.GetMessage())
	}
	if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool { return len(testutil.ToolServers(cfg.Ports.Qperf)) == 0 }) {
		t.Errorf("the lingering qperf server %v still runs after its StopServer", testutil.ToolServers(cfg.Ports.Qperf))
	}
	if pids := testutil.ToolServers(cfg.Ports.Iperf3); len(pids) != 1 || pids[0] == oldIperf3[0] {
		t.Errorf("iperf3 server processes %v; want the new one only (the old was %v)", pids, oldIperf3)
	}
}

// TestLingerBound: a lingering server that still serves (a connection
// stays open) is stopped at its bound.
func TestLingerBound(t *testing.T) {
	cfg, _, fs, _ := lingerAgent(t, time.Second, time.Hour)
	st := startOK(t, fs, "r/q", qperf)
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(st.GetPort()))), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	pids := testutil.ToolServers(cfg.Ports.Qperf)
	endSession(t, fs)
	if len(pids) == 0 {
		t.Fatal("no qperf server process")
	}
	if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool { return len(testutil.ToolServers(cfg.Ports.Qperf)) == 0 }) {
		t.Errorf("the lingering qperf server %v still runs past its bound", testutil.ToolServers(cfg.Ports.Qperf))
	}
}

// TestShutdownStopsLingering: when the agent stops, its lingering servers
// stop with it, with their whole process group.
func TestShutdownStopsLingering(t *testing.T) {
	cfg, next, fs, stop := lingerAgent(t, time.Hour, time.Hour)
	st := startOK(t, fs, "r/q", qperf)
	startOK(t, fs, "r/i", iperf3)
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(st.GetPort()))), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	pids := testutil.ToolServers(cfg.Ports.Iperf3, cfg.Ports.Qperf)
	endSession(t, fs)
	fs = next()
	fs.accept(t, time.Second, 30*time.Second)
	if len(pids) < 2 {
		t.Fatalf("server processes %v, want iperf3's and qperf's", pids)
	}
	groups := map[int]bool{}
	for _, pid := range pids {
		if !testutil.ProcAlive(pid) {
			t.Fatalf("server process %d did not linger", pid)
		}
		st, _ := testutil.ReadProcStat(pid)
		groups[st.PGRP] = true
	}
	stop()
	for g := range groups { // each server leads its own process group
		var left []int
		if !testutil.Within(15*time.Second, 20*time.Millisecond, func() bool { left = testutil.ProcGroup(g); return len(left) == 0 }) {
			t.Errorf("process group %d still has live processes %v after the agent stopped", g, left)
		}
	}
}
