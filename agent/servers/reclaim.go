package servers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// reclaimWait bounds how long Reclaim waits for the servers it killed to
// exit.
const reclaimWait = 5 * time.Second

// Orphan is a server that Reclaim killed: one left running by a previous
// life of the agent.
type Orphan struct {
	// PID is the server's process ID.
	PID int
	// WorkID is the work ID (RUN_ID/TEST_ID) the server was started for.
	WorkID string
	// Tool is "iperf3" or "qperf".
	Tool string
	// Port is the server's listen port.
	Port uint32
	// Network is "host" or "pod".
	Network string
	// Killed are the PIDs signaled: the server's and those of the
	// children it forked (qperf forks one per connection).
	Killed []int
}

// Reclaim kills the servers that a previous life of the agent recorded in
// StateDir and left running, logs each, waits (up to 5 s, or until ctx
// ends) until they are gone, and clears the state file. The agent calls it
// at startup, before it connects, so that no server of a test the
// coordinator has given up on holds a port.
//
// A recorded server is killed only if its PID still runs, was started at
// the recorded time (/proc/PID/stat field 22) and runs the recorded tool's
// server on the recorded port in the recorded network namespace; a PID
// reused by another process is left alone. The children in its process
// group that run the same server are killed with it, and so are they when
// the server itself is gone (a qperf child outlives a killed parent), if
// they started after it and run in its namespace. A missing state file
// means nothing to reclaim; an unreadable or corrupt one, or a bad entry,
// is logged and ignored: Reclaim never kills what it cannot verify, and
// never fails. Servers this Manager runs itself are kept. It returns the
// servers it killed.
func (m *Manager) Reclaim(ctx context.Context) []Orphan {
	dir := m.cfg.StateDir
	if dir == "" {
		return nil
	}
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		m.log.Debug("no state directory: no server to reclaim", "state_dir", dir)
		return nil
	}
	if !m.ownStateDir() {
		return nil
	}
	path := filepath.Join(dir, StateFile)
	recs, err := readState(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.log.Debug("no state file: no server to reclaim", "file", path)
		return nil
	case err != nil:
		m.log.Warn("state file unreadable: ignored, no server reclaimed", "file", path, "err", err)
		recs = nil
	}

	m.mu.Lock()
	ours := m.recordsLocked()
	m.mu.Unlock()
	var (
		orphans []Orphan
		dying   []procInfo
	)
	for _, r := range recs {
		log := m.log.With("pid", r.PID, "work_id", r.WorkID, "tool", r.Tool, "port", r.Port, "network", r.Network)
		if err := r.check(); err != nil {
			log.Warn("state file: bad entry ignored", "file", path, "err", err)
			continue
		}
		if slices.ContainsFunc(ours, func(o record) bool { return o.PID == r.PID && o.StartTime == r.StartTime }) {
			continue
		}
		procs, why := victims(r)
		if len(procs) == 0 {
			log.Info("recorded server not killed", "reason", why)
			continue
		}
		o := Orphan{PID: r.PID, WorkID: r.WorkID, Tool: r.Tool, Port: r.Port, Network: r.Network}
		for _, p := range procs {
			switch err := kill(p); {
			case errors.Is(err, os.ErrProcessDone):
			case err != nil:
				log.Error("could not kill a server left running by the agent's previous life", "process", p.PID, "err", err)
			default:
				log.Warn("killed a server left running by the agent's previous life", "process", p.PID, "cmd", strings.Join(p.argv, " "))
				o.Killed = append(o.Killed, p.PID)
				dying = append(dying, p)
			}
		}
		if len(o.Killed) > 0 {
			orphans = append(orphans, o)
		}
	}
	if left := waitGone(ctx, dying); len(left) > 0 {
		m.log.Error("killed servers have not exited", "pids", left)
	}
	if err := writeState(dir, ours); err != nil {
		m.log.Warn("state file not cleared", "file", path, "err", err)
	}
	return orphans
}

// victims returns the live processes of r's server that may be killed,
// and when there are none, why.
func victims(r record) ([]procInfo, string) {
	leader, err := readProc(r.PID)
	leaderAlive := err == nil && leader.Alive()
	if leaderAlive {
		switch {
		case leader.StartTime != r.StartTime:
			return nil, fmt.Sprintf("gone; its PID now belongs to another process (started at tick %d, the server at %d)", leader.StartTime, r.StartTime)
		case !leader.serves(r.Tool, r.Port):
			return nil, fmt.Sprintf("its PID runs %q, not %s's server on port %d", strings.Join(leader.argv, " "), r.Tool, r.Port)
		case r.NetNS != "" && leader.netns != r.NetNS:
			return nil, fmt.Sprintf("its PID runs in network namespace %s, not %s", leader.netns, r.NetNS)
		}
	}
	// The members of its process group. While the leader lives, the group
	// is its own; once it is gone, a member must also be in the recorded
	// namespace to count as the server's child.
	if !leaderAlive && r.NetNS == "" {
		return nil, "already gone"
	}
	var out []procInfo
	if leaderAlive {
		out = append(out, leader)
	}
	pids, _ := procPIDs()
	for _, pid := range pids {
		if pid == r.PID {
			continue
		}
		p, err := readProc(pid)
		if err != nil || p.PGRP != r.PID || !p.Alive() || p.StartTime < r.StartTime || !p.serves(r.Tool, r.Port) {
			continue
		}
		if r.NetNS != "" && p.netns != r.NetNS {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, "already gone"
	}
	return out, ""
}

// kill sends SIGKILL to p if it still is the process that was read. The
// handle (a pidfd on Linux) pins a process before the check, so a PID
// reused in between is never signaled. os.ErrProcessDone means p is gone.
func kill(p procInfo) error {
	h, err := os.FindProcess(p.PID)
	if err != nil {
		return err
	}
	defer func() { _ = h.Release() }()
	if now, err := readProc(p.PID); err != nil || !now.sameAs(p) {
		return os.ErrProcessDone
	}
	return h.Signal(syscall.SIGKILL) // os.ErrProcessDone if it exited meanwhile
}

// waitGone waits until none of procs runs (a zombie has exited, a reused
// PID is another process) or ctx ends, at most reclaimWait, and returns the
// PIDs left.
func waitGone(ctx context.Context, procs []procInfo) []int {
	if len(procs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reclaimWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var left []int
		for _, p := range procs {
			if now, err := readProc(p.PID); err == nil && now.sameAs(p) {
				left = append(left, p.PID)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return left
		case <-tick.C:
		}
	}
}

// recordOf returns the state file's entry for a server that listens, or
// nil (logged) if its process cannot be read.
func (m *Manager) recordOf(workID string, p *proc.Process, tool string, port uint32, network measurev1.Network) *record {
	info, err := readProc(p.Pid())
	if err != nil || !info.Alive() {
		m.log.Warn("server not recorded in the state file: its process cannot be read", "work_id", workID, "pid", p.Pid(), "err", err)
		return nil
	}
	return &record{
		WorkID: workID, PID: p.Pid(), StartTime: info.StartTime,
		Tool: tool, Port: port, Network: network.String(), NetNS: info.netns,
	}
}

// recordsLocked returns the entries of the running servers, by PID; the
// caller holds mu.
func (m *Manager) recordsLocked() []record {
	var recs []record
	for _, s := range m.byWork {
		if s.rec != nil {
			recs = append(recs, *s.rec)
		}
	}
	slices.SortFunc(recs, func(a, b record) int { return a.PID - b.PID })
	return recs
}

// saveState writes the running servers to the state file; a failure is
// logged (the servers run on, unrecorded).
func (m *Manager) saveState() {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	m.saveStateLocked()
}

// saveStateLocked is saveState with stateMu held.
func (m *Manager) saveStateLocked() {
	if m.cfg.StateDir == "" || !m.ownStateDir() {
		return
	}
	m.mu.Lock()
	recs := m.recordsLocked()
	m.mu.Unlock()
	if err := writeState(m.cfg.StateDir, recs); err != nil {
		m.log.Warn("state file not written: a server a crash leaves running will not be reclaimed", "state_dir", m.cfg.StateDir, "err", err)
	}
}

// ownStateDir takes StateDir for this Manager if it has not yet; it
// reports whether the Manager owns it. The caller holds stateMu.
func (m *Manager) ownStateDir() bool {
	if m.stateDir != nil {
		return true
	}
	if m.stateOff {
		return false
	}
	f, err := lockDir(m.cfg.StateDir)
	if err != nil {
		m.stateOff = true
		m.log.Error("state directory unusable: servers are not recorded, and those a crash leaves running will not be reclaimed",
			"state_dir", m.cfg.StateDir, "err", err)
		return false
	}
	m.stateDir = f
	return true
}
