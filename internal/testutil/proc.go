package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/procstat"
)

// procRoot is the proc file system the helpers read.
const procRoot = "/proc"

// ProcStat is what /proc/PID/stat says of one process (procstat.Stat).
type ProcStat = procstat.Stat

// ReadProcStat reads /proc/PID/stat; ok is false if pid does not exist or
// its stat cannot be parsed.
func ReadProcStat(pid int) (ProcStat, bool) {
	s, err := procstat.Read(pid)
	return s, err == nil
}

// ProcAlive reports whether pid runs; a zombie or a process that does not
// exist does not.
func ProcAlive(pid int) bool {
	s, ok := ReadProcStat(pid)
	return ok && s.Alive()
}

// PIDs lists the process IDs in /proc, in no particular order; nil if
// /proc cannot be read.
func PIDs() []int {
	entries, _ := os.ReadDir(procRoot)
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcGroup lists the live processes of process group pgid, the leader
// included if it runs.
func ProcGroup(pgid int) []int {
	var out []int
	for _, pid := range PIDs() {
		if s, ok := ReadProcStat(pid); ok && s.PGRP == pgid && s.Alive() {
			out = append(out, pid)
		}
	}
	return out
}

// Cmdline returns pid's argument vector from /proc/PID/cmdline; nil if
// the process is gone or has none (a kernel thread, a zombie).
func Cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// ToolServers lists the live iperf3 and qperf processes whose port
// argument (-p or -lp) is one of ports: the servers a test started on its
// own ports, and nobody else's.
func ToolServers(ports ...uint32) []int {
	want := make([]string, len(ports))
	for i, p := range ports {
		want[i] = strconv.Itoa(int(p))
	}
	var pids []int
	for _, pid := range PIDs() {
		if !ProcAlive(pid) {
			continue
		}
		argv := Cmdline(pid)
		if len(argv) == 0 {
			continue
		}
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

// NetNSProc is a process found in one of the network namespaces asked of
// ProcsInNetNS.
type NetNSProc struct {
	// PID is the process ID.
	PID int
	// NetNS is the namespace file, as given to ProcsInNetNS, of the
	// namespace the process runs in.
	NetNS string
	// Argv is the process's argument vector; never empty.
	Argv []string
}

// ProcsInNetNS lists the processes (with a command line) whose network
// namespace is one of the namespace files nsPaths, found as deploy/lab's
// Down finds them: by the identity (device, inode) of /proc/PID/ns/net.
// It returns an error if a namespace file cannot be stat'ed (the
// namespace is gone) or /proc cannot be read.
func ProcsInNetNS(nsPaths ...string) ([]NetNSProc, error) {
	ids := map[netns.ID]string{}
	for _, path := range nsPaths {
		id, err := netns.IDOf(path)
		if err != nil {
			return nil, fmt.Errorf("namespace %s is gone: %w", path, err)
		}
		ids[id] = path
	}
	if _, err := os.ReadDir(procRoot); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []NetNSProc
	for _, pid := range PIDs() {
		id, err := netns.IDOf(filepath.Join(procRoot, strconv.Itoa(pid), "ns", "net"))
		if err != nil || ids[id] == "" {
			continue
		}
		if argv := Cmdline(pid); len(argv) > 0 {
			out = append(out, NetNSProc{PID: pid, NetNS: ids[id], Argv: argv})
		}
	}
	return out, nil
}

// WaitGone fails t (Fatalf) unless, within 15 s, none of pids runs and
// group pgid (if > 0) is empty. SIGKILL is asynchronous, so a killed
// process may need a moment to go; the bound only turns a leak into a
// failure. What still runs then is killed (SIGKILL) before t fails, so
// that a failing test leaves nothing behind.
func WaitGone(t testing.TB, pgid int, pids []int) {
	t.Helper()
	var left []int
	gone := Within(15*time.Second, 20*time.Millisecond, func() bool {
		left = nil
		for _, pid := range pids {
			if ProcAlive(pid) {
				left = append(left, pid)
			}
		}
		if pgid > 0 {
			for _, pid := range ProcGroup(pgid) {
				if !slices.Contains(left, pid) {
					left = append(left, pid)
				}
			}
		}
		return len(left) == 0
	})
	if !gone {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes %v (group %d) still run", left, pgid)
	}
}
