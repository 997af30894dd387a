package servers

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/testspec"
)

// Defaults of Config.MaxLifetime, Config.LingerMax and Config.LingerIdle.
const (
	// DefaultMaxLifetime is the longest test a server may serve
	// (testspec.MaxExpectedDuration, 10 min), from the server's start.
	DefaultMaxLifetime = testspec.MaxExpectedDuration
	// DefaultLingerMax is twice the longest test a server may serve plus
	// the coordinator's client slack (testspec.ClientSlack): a client in
	// flight at the session's end cannot need its server longer. A
	// server's lifetime (Config.MaxLifetime) ends it before that: in
	// practice the lifetime is the bound, and LingerMax is there for a
	// shorter setting.
	DefaultLingerMax = 2*testspec.MaxExpectedDuration + testspec.ClientSlack
	// DefaultLingerIdle covers what may pass without a connection while a
	// client still needs the server: the gap between the runs of a qperf
	// test with several message sizes, and a client ordered just before the
	// session ended that waits for a ClusterIP (up to 5 s) or a client slot.
	DefaultLingerIdle = 10 * time.Second
)

// lingerPoll is how often a lingering server's connections are checked.
const lingerPoll = 250 * time.Millisecond

// Linger is what the agent calls when its session with the coordinator
// ends, instead of StopAll. Nobody will order the running servers stopped,
// but a client (on another node) may still be sending to one: each running
// server lingers until it exits by itself (iperf3's one-off server, once
// its test is done), until no TCP connection was on its ports for
// Config.LingerIdle, until its lifetime's end or Config.LingerMax from now
// (whichever comes first), or until Stop for its test, StopAll, Close, or a
// Start that needs its port (it yields). A server still starting is
// stopped, as StopAll would. A server that already lingers keeps its
// bound: a second session's end does not extend it.
func (m *Manager) Linger() {
	type entry struct {
		id    string
		s     *server
		until time.Time
	}
	bound := time.Now().Add(m.cfg.LingerMax)
	var stop, linger []entry
	m.mu.Lock()
	for id, s := range m.byWork {
		switch {
		case s.proc == nil:
			stop = append(stop, entry{id: id, s: s})
		case !s.lingering:
			s.lingering = true
			until := bound
			if s.lifeEnd.Before(until) {
				until = s.lifeEnd
			}
			linger = append(linger, entry{id, s, until})
		}
	}
	m.mu.Unlock()
	for _, e := range stop {
		_ = m.stop(e.id, e.s)
	}
	for _, e := range linger {
		m.log.Info("server lingers after the session's end, for a client that may still use it",
			"work_id", e.id, "pid", e.s.proc.Pid(), "until", e.until.Format(time.RFC3339), "idle_limit", m.cfg.LingerIdle)
		go m.linger(e.id, e.s, e.until) // owner: Manager; ends when the server's process exits
	}
}

// linger watches a lingering server until its process exits, and stops it
// at until, or once it had no TCP connection on its ports for LingerIdle.
func (m *Manager) linger(workID string, s *server, until time.Time) {
	bound := time.NewTimer(time.Until(until))
	defer bound.Stop()
	tick := time.NewTicker(lingerPoll)
	defer tick.Stop()
	idleSince := time.Now()
	for {
		select {
		case <-s.proc.Done():
			m.log.Info("lingering server gone", "work_id", workID, "pid", s.proc.Pid())
			return
		case <-bound.C:
			m.log.Info("lingering server stopped at its bound", "work_id", workID, "pid", s.proc.Pid())
			_ = m.stop(workID, s)
			return
		case now := <-tick.C:
			if serving(s.proc.Pid(), s.key.port, s.dataPort) {
				idleSince = now
				continue
			}
			if now.Sub(idleSince) >= m.cfg.LingerIdle {
				m.log.Info("lingering server stopped: no client connected", "work_id", workID, "pid", s.proc.Pid(),
					"idle_for", now.Sub(idleSince).Round(time.Millisecond))
				_ = m.stop(workID, s)
				return
			}
		}
	}
}

// Lingering returns how many servers linger.
func (m *Manager) Lingering() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.byWork {
		if s.lingering {
			n++
		}
	}
	return n
}

// serving reports whether a TCP connection is established on one of ports
// (zero ports are ignored) in pid's network namespace: the server's
// accepted connections (iperf3's control and data streams, qperf's control
// connection, which lasts the whole test, and its data connection). Its
// own listening socket does not count. No other process can hold such a
// local port: the server listens on it.
func serving(pid int, ports ...uint32) bool {
	want := make([]string, 0, len(ports))
	for _, p := range ports {
		if p != 0 {
			want = append(want, fmt.Sprintf(":%04X", p))
		}
	}
	for fields := range tcpSockets(pid) {
		// sl local_address rem_address st ...; st 01 is ESTABLISHED
		if len(fields) < 4 || fields[3] != "01" {
			continue
		}
		for _, w := range want {
			if strings.HasSuffix(fields[1], w) {
				return true
			}
		}
	}
	return false
}
