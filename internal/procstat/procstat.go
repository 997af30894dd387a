// Package procstat owns reading a process's /proc/PID/stat (proc(5),
// Linux 3.5 and later): the fields meshperf uses, parsed past a command
// name that may hold spaces and parentheses. The agent's test servers
// (which recorded server still runs, agent/servers), the simulated
// fleet's CPU figures (deploy/fleet) and the tests' process checks
// (internal/testutil) read it here.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of the file's times: 100 on Linux.
const ClockTicks = 100

// Stat is what /proc/PID/stat says of one process.
type Stat struct {
	// PID is the process ID.
	PID int
	// State is the state letter (field 3): R, S, D, T, Z (zombie), X
	// (dead), ...
	State byte
	// PPID is the parent's process ID (field 4).
	PPID int
	// PGRP is the process group ID (field 5).
	PGRP int
	// UTime and STime are the CPU time of every thread in user and
	// system mode, in clock ticks (ClockTicks; fields 14 and 15).
	UTime, STime uint64
	// StartTime is when the process started, in clock ticks after boot
	// (field 22); with PID it names one process across PID reuse.
	StartTime uint64
}

// Alive reports whether the process runs: a zombie (ended, not yet
// reaped) or a dead process does not.
func (s Stat) Alive() bool { return s.State != 'Z' && s.State != 'X' }

// CPUSeconds is the process's user and system CPU time, every thread, in
// seconds.
func (s Stat) CPUSeconds() float64 { return float64(s.UTime+s.STime) / ClockTicks }

// Read reads and parses /proc/PID/stat. The error wraps fs.ErrNotExist
// when there is no such process, and names the file otherwise.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	s, err := Parse(pid, b)
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// Parse parses b, the text of pid's stat file: "pid (comm) state ppid
// pgrp ...", where comm may hold spaces and parentheses, so the fields
// are read after the last ')'. The error says which field is wrong.
func Parse(pid int, b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[19] field 22 (starttime).
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("%d fields, want at least 22", len(f)+2)
	}
	if len(f[0]) != 1 || !isLetter(f[0][0]) {
		return Stat{}, fmt.Errorf("state %q is not a letter", f[0])
	}
	s := Stat{PID: pid, State: f[0][0]}
	var err error
	for _, n := range []struct {
		name string
		i    int
		v    *int
	}{{"ppid", 1, &s.PPID}, {"pgrp", 2, &s.PGRP}} {
		if *n.v, err = strconv.Atoi(f[n.i]); err != nil {
			return Stat{}, fmt.Errorf("%s %q: %w", n.name, f[n.i], err)
		}
	}
	for _, n := range []struct {
		name string
		i    int
		v    *uint64
	}{{"utime", 11, &s.UTime}, {"stime", 12, &s.STime}, {"starttime", 19, &s.StartTime}} {
		if *n.v, err = strconv.ParseUint(f[n.i], 10, 64); err != nil {
			return Stat{}, fmt.Errorf("%s %q: %w", n.name, f[n.i], err)
		}
	}
	return s, nil
}

// isLetter reports whether c is an ASCII letter, as every state is.
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
