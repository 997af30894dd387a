package servers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// entry is an entry of the state file as a previous life of the agent
// wrote it: the file's format, spelled out by hand.
type entry struct {
	TestID    string `json:"test_id"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Tool      string `json:"tool"`
	Port      uint32 `json:"port"`
	Network   string `json:"network"`
	NetNS     string `json:"netns,omitempty"`
}

// writeStateFile writes a state file of entries in dir.
func writeStateFile(t *testing.T, dir string, entries ...entry) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": 1, "servers": entries})
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, dir, string(b))
}

func writeRaw(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, servers.StateFile), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readStateFile returns the entries of the state file in dir; none if
// there is no file.
func readStateFile(t *testing.T, dir string) []entry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, servers.StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Version int     `json:"version"`
		Servers []entry `json:"servers"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file: %v\n%s", err, b)
	}
	if st.Version != 1 {
		t.Errorf("state file version %d, want 1", st.Version)
	}
	return st.Servers
}

// procStat returns field 22 (start time) and field 5 (process group) of
// /proc/PID/stat; ok is false if pid does not run.
func procStat(pid int) (start uint64, pgrp int, ok bool) {
	st, found := testutil.ReadProcStat(pid)
	return st.StartTime, st.PGRP, found && st.Alive()
}

func netnsOf(t *testing.T, pid int) string {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// leftover is a process of a "previous life": started by the test in a
// process group of its own, as proc.Start does, but without Pdeathsig, so
// that nothing but a kill ends it. It is the test's child, so its PID
// stays its own until the test reaps it; a cleanup kills its group if it
// still runs, and reaps it.
type leftover struct {
	pid  int
	done chan struct{}
}

func startLeftover(t *testing.T, argv ...string) *leftover {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &leftover{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { // owner: the test; ends when the process exits
		_ = cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		select {
		case <-l.done:
		default:
			_ = syscall.Kill(-l.pid, syscall.SIGKILL) // our own child's group, not reaped yet
			<-l.done
		}
	})
	return l
}

// startLeftoverServer starts tool's server on port in namespace ns (""
// = own) as a previous life of the agent did, and waits until it listens.
func startLeftoverServer(t *testing.T, tool measurev1.Tool, port uint32, ns string) *leftover {
	t.Helper()
	cmd, err := runner.ServerCommand(tool, port, testnet.FreePort(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	l := startLeftover(t, cmd.Argv()...)
	deadline := time.Now().Add(15 * time.Second)
	for !servers.Listening(l.pid, port) {
		select {
		case <-l.done:
			t.Fatalf("%s exited before listening", cmd)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %d", cmd, port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return l
}

// entryFor is the true entry of a leftover server.
func entryFor(t *testing.T, l *leftover, tool string, port uint32, network string) entry {
	t.Helper()
	start, _, ok := procStat(l.pid)
	if !ok {
		t.Fatalf("process %d does not run", l.pid)
	}
	return entry{TestID: "run1/t1", PID: l.pid, StartTime: start, Tool: tool, Port: port, Network: network, NetNS: netnsOf(t, l.pid)}
}

// newStateManager returns a Manager on fresh ports with StateDir dir,
// serving the host network and ns as the pod network if not "". It is
// closed when the test ends.
func newStateManager(t *testing.T, dir, ns string) (*servers.Manager, servers.Ports, *testutil.SyncBuffer) {
	t.Helper()
	ports := servers.Ports{Iperf3: testnet.FreePort(t), Qperf: testnet.FreePort(t), QperfData: testnet.FreePort(t)}
	netNS := map[measurev1.Network]string{host: ""}
	if ns != "" {
		netNS[pod] = ns
	}
	logs := &testutil.SyncBuffer{}
	m := servers.New(servers.Config{
		NetNS: netNS, Ports: ports, StateDir: dir,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(m.Close)
	return m, ports, logs
}

// TestReclaim: a state file left by a previous life of the agent is
// reclaimed: a recorded server that still runs is killed, its port is
// free again and the file is cleared; a recorded PID that is now another
// process, or that does not run the recorded server, is left alone.
func TestReclaim(t *testing.T) {
	testnet.Need(t, "iperf3", "qperf", "sleep")
	tests := []struct {
		name string
		// setup starts what the state file points at and returns the
		// file's entries and the process that must die or survive.
		setup    func(t *testing.T) ([]entry, *leftover)
		wantKill bool
		wantLog  string
	}{
		{"iperf3 server on the host network", func(t *testing.T) ([]entry, *leftover) {
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, iperf3, port, "")
			return []entry{entryFor(t, l, "iperf3", port, "NETWORK_HOST")}, l
		}, true, "killed a server left running"},
		{"qperf server in a pod namespace", func(t *testing.T) ([]entry, *leftover) {
			ns := testnet.NewNetNS(t, "mp-rcl")
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, qperf, port, ns)
			return []entry{entryFor(t, l, "qperf", port, "NETWORK_POD")}, l
		}, true, "killed a server left running"},
		{"entry without a namespace", func(t *testing.T) ([]entry, *leftover) {
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, qperf, port, "")
			e := entryFor(t, l, "qperf", port, "NETWORK_HOST")
			e.NetNS = ""
			return []entry{e}, l
		}, true, "killed a server left running"},
		{"PID reused by a sleep", func(t *testing.T) ([]entry, *leftover) {
			l := startLeftover(t, "sleep", "300")
			start, _, _ := procStat(l.pid)
			// The server that had this PID started at another time.
			return []entry{{TestID: "run1/t1", PID: l.pid, StartTime: start - 1, Tool: "iperf3", Port: 5201, Network: "NETWORK_HOST"}}, l
		}, false, "PID now belongs to another process"},
		{"PID reused by another agent's iperf3 server", func(t *testing.T) ([]entry, *leftover) {
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, iperf3, port, "")
			e := entryFor(t, l, "iperf3", port, "NETWORK_HOST")
			e.StartTime++
			return []entry{e}, l
		}, false, "PID now belongs to another process"},
		{"same start time, not a server", func(t *testing.T) ([]entry, *leftover) {
			l := startLeftover(t, "sleep", "300")
			start, _, _ := procStat(l.pid)
			return []entry{{TestID: "run1/t1", PID: l.pid, StartTime: start, Tool: "iperf3", Port: 5201, Network: "NETWORK_HOST"}}, l
		}, false, "not iperf3's server"},
		{"a server on another port", func(t *testing.T) ([]entry, *leftover) {
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, iperf3, port, "")
			return []entry{entryFor(t, l, "iperf3", testnet.FreePort(t), "NETWORK_HOST")}, l
		}, false, "not iperf3's server"},
		{"the other tool", func(t *testing.T) ([]entry, *leftover) {
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, qperf, port, "")
			return []entry{entryFor(t, l, "iperf3", port, "NETWORK_HOST")}, l
		}, false, "not iperf3's server"},
		{"in another namespace", func(t *testing.T) ([]entry, *leftover) {
			port := testnet.FreePort(t)
			l := startLeftoverServer(t, iperf3, port, "")
			e := entryFor(t, l, "iperf3", port, "NETWORK_HOST")
			e.NetNS = "net:[1]"
			return []entry{e}, l
		}, false, "network namespace"},
		{"already gone", func(t *testing.T) ([]entry, *leftover) {
			l := startLeftover(t, "true")
			<-l.done // exited and reaped: its PID runs nothing, or something else
			return []entry{{TestID: "run1/t1", PID: l.pid, StartTime: 1, Tool: "qperf", Port: 19765, Network: "NETWORK_HOST"}}, nil
		}, false, "not killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, l := tt.setup(t)
			writeStateFile(t, dir, entries...)
			m, _, logs := newStateManager(t, dir, "")

			got := m.Reclaim(testnet.Ctx(t, time.Minute))

			if tt.wantKill {
				if len(got) != 1 || got[0].PID != l.pid || got[0].Tool != entries[0].Tool || got[0].Port != entries[0].Port {
					t.Errorf("Reclaim = %+v, want the server %d", got, l.pid)
				}
				// Reclaim returns once the server is gone: our child is a
				// zombie or reaped already.
				if _, _, ok := procStat(l.pid); ok {
					t.Errorf("server %d still runs after Reclaim", l.pid)
				}
				<-l.done
				// Its port is free for this life's servers.
				if port := entries[0].Port; entries[0].Network == "NETWORK_HOST" {
					if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
						t.Errorf("port %d not free after Reclaim: %v", port, err)
					} else {
						_ = ln.Close()
					}
				}
			} else {
				if len(got) != 0 {
					t.Errorf("Reclaim = %+v, want nothing killed", got)
				}
				if l != nil {
					if _, _, ok := procStat(l.pid); !ok {
						t.Errorf("process %d was killed", l.pid)
					}
				}
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, logs)
			}
			if left := readStateFile(t, dir); len(left) != 0 {
				t.Errorf("state file after Reclaim: %+v, want cleared", left)
			}
		})
	}
}

// TestReclaimQperfChild: qperf forks a child per connection, which
// outlives its parent; once the recorded server is gone, the children
// of its process group that run the same server in its namespace are
// killed.
func TestReclaimQperfChild(t *testing.T) {
	testnet.Need(t, "qperf")
	port, dataPort := testnet.FreePort(t), testnet.FreePort(t)
	l := startLeftoverServer(t, qperf, port, "")
	e := entryFor(t, l, "qperf", port, "NETWORK_HOST")
	ctx := testnet.Ctx(t, 2*time.Minute)
	client, err := proc.Start(ctx, proc.Command{Name: "qperf", Args: []string{
		"127.0.0.1", "-lp", strconv.Itoa(int(port)), "-ip", strconv.Itoa(int(dataPort)), "-t", "60", "tcp_bw",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Stop() })
	var child int
	testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "qperf to fork a child for the connection", func() bool {
		child = groupMember(l.pid)
		return child != 0
	})
	if child == 0 {
		t.FailNow()
	}
	childStart, _, _ := procStat(child)
	t.Cleanup(func() {
		if start, pgrp, ok := procStat(child); ok && start == childStart && pgrp == l.pid {
			_ = syscall.Kill(child, syscall.SIGKILL) // the same qperf child, still there
		}
	})
	// The agent's death took the server, not its child.
	if err := syscall.Kill(l.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if _, _, ok := procStat(child); !ok {
		t.Skip("qperf's child died with its parent: nothing left to reclaim")
	}

	dir := t.TempDir()
	writeStateFile(t, dir, e)
	m, _, logs := newStateManager(t, dir, "")
	got := m.Reclaim(ctx)
	if len(got) != 1 || !slices.Equal(got[0].Killed, []int{child}) {
		t.Errorf("Reclaim = %+v, want the child %d of server %d killed", got, child, l.pid)
	}
	if start, _, ok := procStat(child); ok && start == childStart {
		t.Errorf("qperf child %d still runs after Reclaim\n%s", child, logs)
	}
}

// groupMember returns a process of group pgrp other than its leader, or 0.
func groupMember(pgrp int) int {
	for _, pid := range testutil.ProcGroup(pgrp) {
		if pid != pgrp {
			return pid
		}
	}
	return 0
}

// TestReclaimBadStateFile: a state file that cannot be read is logged and
// ignored; nothing is killed, not even the live server it seems to point
// at, and the file is cleared. A bad entry is skipped, the others count.
func TestReclaimBadStateFile(t *testing.T) {
	testnet.Need(t, "iperf3")
	port := testnet.FreePort(t)
	l := startLeftoverServer(t, iperf3, port, "")
	good := entryFor(t, l, "iperf3", port, "NETWORK_HOST")
	b, _ := json.Marshal(map[string]any{"version": 1, "servers": []entry{good}})
	valid := string(b)
	tests := []struct {
		name    string
		content string
		wantLog string
	}{
		{"empty", "", "state file unreadable"},
		{"garbage", "\x00\x01not json{", "state file unreadable"},
		{"truncated", valid[:len(valid)-12], "state file unreadable"},
		{"wrong type", `{"version":1,"servers":[{"pid":"` + strconv.Itoa(l.pid) + `"}]}`, "state file unreadable"},
		{"unknown version", strings.Replace(valid, `"version":1`, `"version":2`, 1), "format version 2"},
		{"no version", strings.Replace(valid, `"version":1`, `"v":1`, 1), "format version 0"},
		{"bad entries only", `{"version":1,"servers":[{"pid":0,"start_time":1,"tool":"iperf3","port":5201},` +
			`{"pid":` + strconv.Itoa(l.pid) + `,"start_time":1,"tool":"sh","port":5201},` +
			`{"pid":` + strconv.Itoa(l.pid) + `,"tool":"iperf3","port":5201}]}`, "bad entry ignored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRaw(t, dir, tt.content)
			m, _, logs := newStateManager(t, dir, "")
			if got := m.Reclaim(testnet.Ctx(t, time.Minute)); len(got) != 0 {
				t.Errorf("Reclaim = %+v, want nothing killed", got)
			}
			if _, _, ok := procStat(l.pid); !ok {
				t.Fatalf("server %d was killed", l.pid)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, logs)
			}
			if _, err := os.Stat(filepath.Join(dir, servers.StateFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("state file not cleared: %v", err)
			}
		})
	}

	t.Run("bad entry among good", func(t *testing.T) {
		dir := t.TempDir()
		writeStateFile(t, dir, entry{PID: -4, StartTime: 1, Tool: "iperf3", Port: 1}, good)
		m, _, logs := newStateManager(t, dir, "")
		if got := m.Reclaim(testnet.Ctx(t, time.Minute)); len(got) != 1 || got[0].PID != l.pid {
			t.Errorf("Reclaim = %+v, want server %d", got, l.pid)
		}
		if !strings.Contains(logs.String(), "bad entry ignored") {
			t.Errorf("log lacks the bad entry:\n%s", logs)
		}
		<-l.done
	})
}

// TestReclaimNothing: no state directory or no state file is nothing to
// reclaim, and Reclaim creates nothing; no StateDir disables it.
func TestReclaimNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent-node-1")
	m, _, _ := newStateManager(t, dir, "")
	if got := m.Reclaim(testnet.Ctx(t, time.Minute)); got != nil {
		t.Errorf("Reclaim without a directory = %+v", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Reclaim created %s: %v", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := m.Reclaim(testnet.Ctx(t, time.Minute)); got != nil {
		t.Errorf("Reclaim without a file = %+v", got)
	}
	if got := servers.New(servers.Config{}).Reclaim(testnet.Ctx(t, time.Minute)); got != nil {
		t.Errorf("Reclaim without StateDir = %+v", got)
	}
}

// TestStateFile: the Manager records each running server in the state
// file (mode 0600, in a directory of mode 0700) with its PID, start time,
// tool, port, network and namespace, drops it when the server is gone,
// and never reclaims its own servers. A second Manager on the same
// directory (another live agent) keeps no state and kills nothing.
func TestStateFile(t *testing.T) {
	testnet.Need(t, "iperf3", "qperf")
	dir := filepath.Join(t.TempDir(), "agent-node-1")
	ns := testnet.NewNetNS(t, "mp-st")
	m, ports, _ := newStateManager(t, dir, ns)
	ctx := testnet.Ctx(t, time.Minute)
	if _, err := m.Start(ctx, "run1/a", iperf3, host); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, "run1/b", qperf, pod); err != nil {
		t.Fatal(err)
	}

	for path, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, filepath.Join(dir, servers.StateFile): 0o600} {
		if fi, err := os.Stat(path); err != nil {
			t.Fatal(err)
		} else if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	got := readStateFile(t, dir)
	if len(got) != 2 {
		t.Fatalf("state file has %d entries, want 2: %+v", len(got), got)
	}
	byWork := map[string]entry{}
	for _, e := range got {
		byWork[e.TestID] = e
	}
	for _, w := range []struct {
		id, tool, network string
		port              uint32
		ns                string
	}{{"run1/a", "iperf3", "NETWORK_HOST", ports.Iperf3, "/proc/self/ns/net"}, {"run1/b", "qperf", "NETWORK_POD", ports.Qperf, ns}} {
		e, ok := byWork[w.id]
		if !ok {
			t.Errorf("no entry for %s: %+v", w.id, got)
			continue
		}
		start, pgrp, alive := procStat(e.PID)
		var st syscall.Stat_t
		if err := syscall.Stat(w.ns, &st); err != nil {
			t.Fatal(err)
		}
		wantNS := fmt.Sprintf("net:[%d]", st.Ino)
		if !alive || start != e.StartTime || pgrp != e.PID {
			t.Errorf("%s: entry %+v: the process runs %v, started at %d, in group %d", w.id, e, alive, start, pgrp)
		}
		if e.Tool != w.tool || e.Port != w.port || e.Network != w.network || e.NetNS != wantNS {
			t.Errorf("%s: entry %+v, want tool %s port %d network %s netns %s", w.id, e, w.tool, w.port, w.network, wantNS)
		}
	}

	// Reclaim leaves this Manager's own servers alone.
	if k := m.Reclaim(ctx); len(k) != 0 {
		t.Errorf("Reclaim killed the Manager's own servers: %+v", k)
	}
	// So does another Manager on the same directory: it is taken.
	other, _, otherLogs := newStateManager(t, dir, "")
	if k := other.Reclaim(ctx); len(k) != 0 {
		t.Errorf("a second Manager's Reclaim killed %+v", k)
	}
	if !strings.Contains(otherLogs.String(), "locked by another live agent") {
		t.Errorf("the second Manager does not say the directory is taken:\n%s", otherLogs)
	}
	if n := m.Running(); n != 2 || len(readStateFile(t, dir)) != 2 {
		t.Fatalf("after Reclaim: %d running, state file %+v", n, readStateFile(t, dir))
	}

	if err := m.Stop("run1/a"); err != nil {
		t.Fatal(err)
	}
	if got := readStateFile(t, dir); len(got) != 1 || got[0].TestID != "run1/b" {
		t.Errorf("after Stop(run1/a): %+v, want run1/b only", got)
	}
	m.Close()
	if _, err := os.Stat(filepath.Join(dir, servers.StateFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file left after Close: %v", err)
	}
	// Once closed, the directory is free for the next life.
	next, _, nextLogs := newStateManager(t, dir, "")
	if k := next.Reclaim(ctx); len(k) != 0 {
		t.Errorf("Reclaim after a clean shutdown killed %+v", k)
	}
	if strings.Contains(nextLogs.String(), "locked") {
		t.Errorf("the directory is still taken after Close:\n%s", nextLogs)
	}
}

// TestStateFileReaped: a one-shot iperf3 server that exits by itself
// leaves the state file.
func TestStateFileReaped(t *testing.T) {
	testnet.Need(t, "iperf3")
	dir := t.TempDir()
	m, _, _ := newStateManager(t, dir, "")
	st, err := m.Start(testnet.Ctx(t, time.Minute), "t1", iperf3, host)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(readStateFile(t, dir)); n != 1 {
		t.Fatalf("state file has %d entries, want 1", n)
	}
	out, err := proc.Run(testnet.Ctx(t, time.Minute), proc.Command{Name: "iperf3", Args: []string{
		"-c", "127.0.0.1", "-p", strconv.Itoa(int(st.Port)), "-n", "1M", "--connect-timeout", "5000",
	}})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("iperf3 client: %v, exit %d: %s%s", err, out.ExitCode, out.Stdout, out.Stderr)
	}
	testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the reaped server to leave the state file", func() bool { return len(readStateFile(t, dir)) == 0 })
}
