// Package servers owns the test servers an agent starts on the
// coordinator's orders (iperf3 and qperf, in the host or the pod network):
// one per test, on a pinned port, never shared by two tests, ready (its port
// listening) before Start returns, and killed with its process group on
// Stop, on its lifetime's end, or on StopAll.
//
// When the agent's session with the coordinator ends, the agent calls
// Linger rather than StopAll: a server that still runs lingers, so that a
// client already sending to it (from another node, whose result that
// node's agent keeps for the next coordinator) ends its test. A lingering
// server goes when its client is done (iperf3's one-off server exits by
// itself; any server with no TCP connection on its ports for
// Config.LingerIdle is stopped), at its bound (the end of its lifetime or
// Config.LingerMax after the session's end, whichever comes first), on
// Stop for its test (a new coordinator may still send one), on StopAll,
// and as soon as a new Start needs its port: it yields, a new test wins
// over a finishing one. Linger never outlives the agent: Close stops every
// server, lingering or not, and a server dies with its agent process.
//
// A server dies with its agent (proc.Start sets Pdeathsig). In case one
// does not (a fork that escaped it, a tool that resets it), the Manager
// records every running server in a state file, and Reclaim, which the
// agent calls at startup, kills those a previous life of the agent left
// running: only after checking that each PID is still that very process.
package servers

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/tick"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Errors of Start and Stop; match with errors.Is.
var (
	// ErrBusy: another test's server holds the port.
	ErrBusy = errors.New("server busy")
	// ErrUnknown: no server was started for that work ID.
	ErrUnknown = errors.New("no server for this work ID")
	// ErrNotReady: the server did not listen in time or exited first.
	ErrNotReady = errors.New("server not ready")
	// ErrStopped: Stop or StopAll came for the test while its server was
	// starting; the start was canceled and nothing runs.
	ErrStopped = errors.New("server stopped while starting")
)

// Ports are the pinned ports of the servers; both networks use the same.
type Ports struct {
	// Iperf3 is iperf3's port (-p); zero means
	// protocol.DefaultIperf3Port.
	Iperf3 uint32
	// Qperf is qperf's listen port (-lp); zero means
	// protocol.DefaultQperfPort.
	Qperf uint32
	// QperfData is qperf's data port (-ip) that clients ask for; zero
	// means protocol.DefaultQperfDataPort.
	QperfData uint32
}

// SetDefaults sets each zero port of p to its default.
func (p *Ports) SetDefaults() {
	for _, f := range []struct {
		port *uint32
		def  uint32
	}{{&p.Iperf3, protocol.DefaultIperf3Port}, {&p.Qperf, protocol.DefaultQperfPort}, {&p.QperfData, protocol.DefaultQperfDataPort}} {
		if *f.port == 0 {
			*f.port = f.def
		}
	}
}

// Config configures New.
type Config struct {
	// NetNS is the namespace path per network; "" is the agent's own.
	NetNS map[measurev1.Network]string
	// Ports are the pinned ports.
	Ports Ports
	// MaxLifetime kills a server nobody stopped; zero means
	// DefaultMaxLifetime.
	MaxLifetime time.Duration
	// LingerMax bounds how long a server runs on after Linger; zero means
	// DefaultLingerMax. Its lifetime (MaxLifetime) still ends it first.
	LingerMax time.Duration
	// LingerIdle is how long a lingering server may go without any TCP
	// connection on its ports (no client, or its client is done) before it
	// is stopped; zero means DefaultLingerIdle.
	LingerIdle time.Duration
	// Logger receives server events; nil means discard.
	Logger *slog.Logger
	// StateDir is the directory (created with mode 0700) of StateFile, in
	// which the Manager records each running server (PID, start time,
	// tool, port, network) so that Reclaim, in the agent's next life, can
	// kill what a crash left running. One live Manager owns a StateDir (an
	// flock that the kernel releases when its process dies); a Manager
	// that finds it taken logs so and keeps no state. Empty means no state
	// file, and Reclaim does nothing.
	StateDir string
}

// Manager starts and stops servers. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	byWork map[string]*server
	byPort map[portKey]string // -> work ID

	// stateMu serializes the state file's writes and Reclaim; it is taken
	// before mu, never while holding it.
	stateMu sync.Mutex
	// stateDir is StateDir, open and flocked once this Manager owns it.
	stateDir *os.File
	// stateOff is set when StateDir cannot be owned: no state is kept.
	stateOff bool
}

type portKey struct {
	network measurev1.Network
	port    uint32
}

// server is a test's server from the moment Start reserved its work ID and
// port: while it starts (proc nil), then while it runs.
type server struct {
	key portKey
	// ready is closed when Start is over, whatever its outcome.
	ready chan struct{}
	// abort cancels the Start's wait for the port; stopped says that Stop
	// or StopAll asked for it. Both are set under Manager.mu.
	abort   context.CancelFunc
	stopped bool

	// dataPort is qperf's data port (0 for iperf3): a connection on it
	// also shows the server serving.
	dataPort uint32

	// Set under Manager.mu once the server listens.
	proc    *proc.Process
	cancel  context.CancelFunc // ends the server's lifetime context
	rec     *record            // its entry in the state file; nil if none
	lifeEnd time.Time          // when its lifetime context kills it
	// lingering is set by Linger (under Manager.mu): the session that
	// ordered the server has ended, and a new Start may take its port.
	lingering bool
}

// New returns a Manager with no server running.
func New(cfg Config) *Manager {
	cfg.Ports.SetDefaults()
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.LingerMax == 0 {
		cfg.LingerMax = DefaultLingerMax
	}
	if cfg.LingerIdle == 0 {
		cfg.LingerIdle = DefaultLingerIdle
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log, byWork: map[string]*server{}, byPort: map[portKey]string{}}
}

// Started describes a listening server.
type Started struct {
	// Port is the listen port; DataPort is qperf's data port (0 for iperf3).
	Port, DataPort uint32
}

// Start starts tool's server for workID in network and returns once its
// port listens (or ctx ends). The work ID and the port are reserved from
// the start: a second Start for workID fails whatever its network or tool,
// and Stop or StopAll during the start cancels it. A lingering server (see
// Linger) on the port is stopped first: it yields. Errors wrap ErrBusy (the
// port is another running test's), ErrNotReady (with the tool's own message),
// ErrStopped, proc.ErrNotFound, or say which argument was refused. A failed
// Start leaves nothing running and nothing reserved.
func (m *Manager) Start(ctx context.Context, workID string, tool measurev1.Tool, network measurev1.Network) (Started, error) {
	ns, ok := m.cfg.NetNS[network]
	if !ok {
		return Started{}, fmt.Errorf("network %v is not served by this agent", network)
	}
	var st Started
	switch tool {
	case measurev1.Tool_TOOL_IPERF3:
		st = Started{Port: m.cfg.Ports.Iperf3}
	case measurev1.Tool_TOOL_QPERF:
		st = Started{Port: m.cfg.Ports.Qperf, DataPort: m.cfg.Ports.QperfData}
	default:
		return Started{}, fmt.Errorf("tool %v has no server", tool)
	}
	cmd, err := runner.ServerCommand(tool, st.Port, st.DataPort, ns)
	if err != nil {
		return Started{}, err
	}
	key := portKey{network: network, port: st.Port}

	// Reserve the work ID and the port before anything starts: a second
	// Start for the test (on any network) is refused, and a Stop that comes
	// while this one waits for the port cancels it.
	startCtx, abort := context.WithCancel(ctx)
	defer abort()
	s := &server{key: key, dataPort: st.DataPort, ready: make(chan struct{}), abort: abort}
	defer close(s.ready)
	if err := m.reserve(workID, s); err != nil {
		return Started{}, err
	}

	s.lifeEnd = time.Now().Add(m.cfg.MaxLifetime)
	lifeCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), s.lifeEnd)
	var p *proc.Process
	if err = startCtx.Err(); err != nil { // stopped or out of time already: start nothing
		err = fmt.Errorf("%w: not started: %w", ErrNotReady, err)
	} else {
		p, err = proc.Start(lifeCtx, cmd)
	}
	if err == nil {
		err = waitListening(startCtx, p, st.Port)
	}
	var rec *record
	if err == nil && m.cfg.StateDir != "" {
		rec = m.recordOf(workID, p, cmd.Name, st.Port, network)
	}
	m.mu.Lock()
	if s.stopped {
		err = fmt.Errorf("%w: work %q", ErrStopped, workID)
	}
	if err == nil {
		s.proc, s.cancel, s.rec = p, cancel, rec
		m.mu.Unlock()
		m.log.Info("server started", "work_id", workID, "cmd", cmd.String(), "pid", p.Pid())
		go m.reap(workID, s) // owner: Manager; ends when the process exits
		if rec != nil {
			// On disk before the coordinator hears of the server.
			m.saveState()
		}
		return st, nil
	}
	m.mu.Unlock()
	// Nothing of this start may outlive it: kill the process (and what it
	// forked) before the work ID and the port are free again.
	if p != nil {
		_ = p.Stop()
	}
	cancel()
	m.forget(workID, s)
	return Started{}, err
}

// reserve reserves workID and s.key for s. A lingering server on the port
// yields: it is stopped, and the reservation tried again (another Start may
// take the port meanwhile: then this one is busy).
func (m *Manager) reserve(workID string, s *server) error {
	for {
		m.mu.Lock()
		if other, dup := m.byWork[workID]; dup {
			m.mu.Unlock()
			state := "running"
			if other.proc == nil {
				state = "starting"
			}
			return fmt.Errorf("work %q already has a server (%s on port %d in the %v network)", workID, state, other.key.port, other.key.network)
		}
		owner, busy := m.byPort[s.key]
		if !busy {
			m.byWork[workID] = s
			m.byPort[s.key] = workID
			m.mu.Unlock()
			return nil
		}
		o := m.byWork[owner]
		if !o.lingering {
			m.mu.Unlock()
			return fmt.Errorf("%w: port %d in the %v network serves work %q", ErrBusy, s.key.port, s.key.network, owner)
		}
		m.mu.Unlock()
		m.log.Info("lingering server yields its port to a new test", "work_id", owner, "new_work_id", workID,
			"port", s.key.port, "network", s.key.network)
		_ = m.stop(owner, o)
	}
}

// forget drops s's reservations if they are still s's, and its entry in
// the state file. Callers forget a server once its process is gone; when
// two forget it at once (Stop and reap), both return once the file is
// written.
func (m *Manager) forget(workID string, s *server) {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	m.mu.Lock()
	recorded := false
	if m.byWork[workID] == s {
		delete(m.byWork, workID)
		delete(m.byPort, s.key)
		recorded = s.rec != nil
	}
	m.mu.Unlock()
	if recorded {
		m.saveStateLocked()
	}
}

// reap forgets a server once its process has exited (iperf3 -1 exits after
// one test; a lifetime's end kills it).
func (m *Manager) reap(workID string, s *server) {
	<-s.proc.Done()
	s.cancel()
	m.forget(workID, s)
}

// Stop kills workID's server and its children and waits until they are
// gone. A server still starting is canceled (its Start fails with
// ErrStopped) and Stop returns once nothing of it runs. A server that
// already exited is fine; a test without a server (never started, or
// already stopped or reaped) wraps ErrUnknown.
func (m *Manager) Stop(workID string) error {
	m.mu.Lock()
	s, ok := m.byWork[workID]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("work %q: %w", workID, ErrUnknown)
	}
	return m.stop(workID, s)
}

// stop is Stop of s, workID's server when the caller looked it up: if
// workID has another server by now (or none), it does nothing.
func (m *Manager) stop(workID string, s *server) error {
	m.mu.Lock()
	if m.byWork[workID] != s {
		m.mu.Unlock()
		return fmt.Errorf("work %q: %w", workID, ErrUnknown)
	}
	if s.proc == nil {
		s.stopped = true
		s.abort()
		m.mu.Unlock()
		<-s.ready // Start killed what it started and dropped the reservations
		m.log.Info("server stopped while starting", "work_id", workID)
		return nil
	}
	m.mu.Unlock()
	err := s.proc.Stop()
	s.cancel()
	m.forget(workID, s)
	m.log.Info("server stopped", "work_id", workID, "pid", s.proc.Pid())
	return err
}

// StopAll stops every server, those still starting and those lingering
// included.
func (m *Manager) StopAll() {
	m.mu.Lock()
	ids := make([]string, 0, len(m.byWork))
	for id := range m.byWork {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		_ = m.Stop(id)
	}
}

// Close stops every server, as StopAll does, and releases StateDir for
// another Manager. The agent calls it on shutdown.
func (m *Manager) Close() {
	m.StopAll()
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if m.stateDir != nil {
		_ = m.stateDir.Close() // drops the flock
		m.stateDir = nil
	}
}

// Running returns how many servers run (lingering ones included) or are
// starting.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byWork)
}

// waitListening polls the server's own view of TCP sockets
// (/proc/PID/net/tcp and tcp6, which show the process's network namespace)
// until port is in LISTEN state, the process exits, or ctx ends.
func waitListening(ctx context.Context, p *proc.Process, port uint32) error {
	exited := false
	err := tick.Until(ctx, 10*time.Millisecond, func() string {
		if listening(p.Pid(), port) {
			return ""
		}
		select {
		case <-p.Done():
			exited = true
			return ""
		default:
		}
		return fmt.Sprintf("not listening on %d", port)
	})
	switch {
	case exited:
		out := p.Output()
		msg := strings.TrimSpace(string(out.Stderr) + " " + string(out.Stdout))
		return fmt.Errorf("%w: exited with code %d before listening on %d: %s", ErrNotReady, out.ExitCode, port, msg)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return nil
}

// tcpSockets yields the fields of every line of pid's /proc/PID/net/tcp
// and /proc/PID/net/tcp6 (their headers too: callers check the columns);
// a file that cannot be read is passed over.
func tcpSockets(pid int) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		for _, f := range []string{"tcp", "tcp6"} {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/" + f)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if !yield(strings.Fields(line)) {
					return
				}
			}
		}
	}
}

// listening reports whether pid itself holds a TCP socket in LISTEN state
// on port: another process listening there (a leftover server) does not
// count.
func listening(pid int, port uint32) bool {
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for fields := range tcpSockets(pid) {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(fields) > 9 && fields[3] == "0A" && strings.HasSuffix(fields[1], want) {
			inodes["socket:["+fields[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return false
	}
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fdDir + "/" + fd.Name()); err == nil && inodes[link] {
			return true
		}
	}
	return false
}
