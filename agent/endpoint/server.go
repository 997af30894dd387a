package endpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/agent/netns"
)

// Errors an endpoint is refused with; match with errors.Is.
var (
	// ErrHostNamespace: the peer runs in the agent's own network namespace,
	// not a pod's.
	ErrHostNamespace = errors.New("peer is in the agent's own network namespace, not a pod's")
	// ErrVanished: the peer process was gone before its namespace was
	// pinned.
	ErrVanished = errors.New("peer process vanished")
	// ErrNoIPv4: the peer's namespace has no global-scope IPv4 address.
	ErrNoIPv4 = errors.New("no global IPv4 address in the peer's network namespace")
	// ErrWrongNode: the peer's hello names another node.
	ErrWrongNode = errors.New("endpoint belongs to another node")
)

// ServerConfig configures Listen.
type ServerConfig struct {
	// Path is the unix socket's path; required. Its directory is created
	// (0755) if missing. A stale socket file there is removed; any other
	// file, or a socket someone still listens on, is an error.
	Path string
	// Mode is the socket file's permission bits; zero means 0660.
	Mode fs.FileMode
	// NodeName is the agent's node; a hello naming another node is
	// refused. Empty means no check.
	NodeName string
	// HelloTimeout bounds the wait for a peer's hello; zero means 5 s.
	HelloTimeout time.Duration
	// Logger receives every admission, refusal, replacement and
	// withdrawal; nil means discard.
	Logger *slog.Logger
}

// Pod is the current pod endpoint, as handed to a consumer by Acquire.
type Pod struct {
	// PID is the endpoint process's PID, as the socket's peer credentials
	// gave it.
	PID int
	// IP is the pod's IPv4 address, found in its network namespace.
	IP netip.Addr
	// NetNS is an open descriptor of the pod's network namespace, the
	// consumer's own: it closes it when done. While it is open, the
	// namespace lives, and NetNSPath names it.
	NetNS *os.File
}

// NetNSPath is a path to the pod's namespace that this process and its
// children (nsenter --net=) can open while NetNS is open:
// /proc/AGENT_PID/fd/N.
func (p *Pod) NetNSPath() string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), p.NetNS.Fd())
}

// Server is the agent's side of the handshake; see Listen and Serve.
type Server struct {
	cfg    ServerConfig
	log    *slog.Logger
	l      *net.UnixListener
	hostNS netns.ID

	changes chan struct{} // capacity 1: a pending change
	wg      sync.WaitGroup

	mu  sync.Mutex
	cur *peer // nil: no pod endpoint
}

// peer is an admitted endpoint connection.
type peer struct {
	c    *net.UnixConn
	pid  int
	ip   netip.Addr
	ns   *os.File
	id   netns.ID
	once sync.Once
}

// close closes the connection and the namespace descriptor, once.
func (p *peer) close() {
	p.once.Do(func() {
		_ = p.c.Close()
		_ = p.ns.Close()
	})
}

// Listen opens the socket; Serve accepts on it.
func Listen(cfg ServerConfig) (*Server, error) {
	if cfg.Path == "" {
		return nil, errors.New("endpoint socket path is empty")
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o660
	}
	if cfg.HelloTimeout == 0 {
		cfg.HelloTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, err := netns.IDOf("/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("own network namespace: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return nil, fmt.Errorf("endpoint socket directory: %w", err)
	}
	if err := removeStale(cfg.Path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on endpoint socket: %w", err)
	}
	l.SetUnlinkOnClose(true)
	// A peer that connects before the chmod is admitted by the same checks
	// as any other: the mode only narrows who may try.
	if err := os.Chmod(cfg.Path, cfg.Mode); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("endpoint socket mode: %w", err)
	}
	log.Info("listening for the pod endpoint", "socket", cfg.Path, "mode", cfg.Mode)
	return &Server{cfg: cfg, log: log, l: l, hostNS: host, changes: make(chan struct{}, 1)}, nil
}

// removeStale removes path if it is a socket nobody listens on. It refuses
// to remove anything else.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("endpoint socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("endpoint socket %s exists and is not a socket (%v); not removing it", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("endpoint socket %s is in use: another agent listens on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale endpoint socket %s: %w", path, err)
	}
	return nil
}

// Changes signals that the pod endpoint changed (admitted, replaced or
// withdrawn); Acquire tells what it is now. Signals coalesce.
func (s *Server) Changes() <-chan struct{} { return s.changes }

// Acquire returns the current pod endpoint with a descriptor of its own,
// or nil if there is none.
func (s *Server) Acquire() (*Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, nil
	}
	fd, err := unix.FcntlInt(s.cur.ns.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the pod namespace descriptor: %w", err)
	}
	return &Pod{PID: s.cur.pid, IP: s.cur.ip, NetNS: os.NewFile(uintptr(fd), fmt.Sprintf("netns of pid %d", s.cur.pid))}, nil
}

// notify signals a change without blocking.
func (s *Server) notify() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// Serve accepts endpoints until ctx ends, then closes the socket (removing
// its file) and every connection, and returns nil; it returns an error if
// accepting fails otherwise.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.l.Close() })
	defer stop()
	defer func() {
		_ = s.l.Close()
		s.mu.Lock()
		cur := s.cur
		s.cur = nil
		s.mu.Unlock()
		if cur != nil {
			cur.close()
		}
		s.wg.Wait()
	}()
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on endpoint socket: %w", err)
		}
		s.wg.Go(func() { s.handle(ctx, c) })
	}
}

// handle admits one connection, makes it the pod endpoint, and withdraws
// it when it closes.
func (s *Server) handle(ctx context.Context, c *net.UnixConn) {
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	p, err := s.admit(c)
	if err != nil {
		s.log.Warn("pod endpoint refused", "err", err)
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_ = writeLine(c, Reply{Error: err.Error()})
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	s.mu.Lock()
	old := s.cur
	s.cur = p
	same := old != nil && old.id == p.id && old.ip == p.ip
	if !same {
		s.notify()
	}
	s.mu.Unlock()
	if err := writeLine(c, Reply{OK: true, PodIP: p.ip.String()}); err != nil {
		s.log.Warn("answer the pod endpoint", "pid", p.pid, "err", err)
	}
	switch {
	case same:
		s.log.Info("pod endpoint reconnected from the same namespace", "pid", p.pid, "old_pid", old.pid, "pod_ip", p.ip)
	case old != nil:
		s.log.Warn("a newer pod endpoint replaces the current one; closing the older connection",
			"pid", p.pid, "pod_ip", p.ip, "old_pid", old.pid, "old_pod_ip", old.ip)
	default:
		s.log.Info("pod endpoint admitted", "pid", p.pid, "pod_ip", p.ip)
	}
	if old != nil {
		_ = old.c.SetWriteDeadline(time.Now().Add(time.Second))
		_ = writeLine(old.c, Reply{Replaced: true, Error: fmt.Sprintf("replaced by the endpoint of pid %d", p.pid)})
		old.close()
	}
	// The endpoint sends nothing more: a read returns when it closes.
	_, _ = io.Copy(io.Discard, c)
	s.mu.Lock()
	withdrawn := s.cur == p
	if withdrawn {
		s.cur = nil
		s.notify()
	}
	s.mu.Unlock()
	if withdrawn && ctx.Err() == nil {
		s.log.Warn("pod endpoint gone: connection closed; withdrawing it", "pid", p.pid, "pod_ip", p.ip)
	}
	p.close()
}

// admit reads the hello and resolves the peer into a pod endpoint.
func (s *Server) admit(c *net.UnixConn) (*peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		cred    *unix.Ucred
		credErr error
		pidfd   = -1
	)
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			// The peer's own pidfd (Linux 6.5+): it cannot name a recycled PID.
			if pfd, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
				pidfd = pfd
			}
		}
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials (SO_PEERCRED): %w", credErr)
	}
	if pidfd >= 0 {
		defer func() { _ = unix.Close(pidfd) }()
	}
	_ = c.SetDeadline(time.Now().Add(s.cfg.HelloTimeout))
	var h Hello
	if err := readLine(bufio.NewReaderSize(c, maxLine), &h); err != nil {
		return nil, fmt.Errorf("hello from pid %d: %w", cred.Pid, err)
	}
	if h.Node != "" && s.cfg.NodeName != "" && h.Node != s.cfg.NodeName {
		return nil, fmt.Errorf("%w: pid %d says node %q, this agent is node %q", ErrWrongNode, cred.Pid, h.Node, s.cfg.NodeName)
	}
	p, err := s.resolve(int(cred.Pid), pidfd)
	if err != nil {
		return nil, err
	}
	p.c = c
	s.log.Debug("pod endpoint hello", "pid", p.pid, "node", h.Node, "version", h.Version, "uid", cred.Uid)
	return p, nil
}

// resolve pins the network namespace of pid and finds its pod IP. pidfd is
// the peer's pidfd, or -1 to open one (on kernels without SO_PEERPIDFD: a
// PID recycled between the connect and this call would then go unseen).
func (s *Server) resolve(pid, pidfd int) (*peer, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("%w: peer credentials carry no PID (%d)", ErrVanished, pid)
	}
	if pidfd < 0 {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: pidfd of pid %d: %w", ErrVanished, pid, err)
		}
		defer func() { _ = unix.Close(fd) }()
		pidfd = fd
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("%w: network namespace of pid %d: %w", ErrVanished, pid, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = ns.Close()
		}
	}()
	// Alive after the open: the namespace is that process's, not the one
	// of a process that took its PID.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return nil, fmt.Errorf("%w: pid %d exited while its namespace was opened: %w", ErrVanished, pid, err)
	}
	if t, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_NSTYPE); err != nil || t != unix.CLONE_NEWNET {
		return nil, fmt.Errorf("/proc/%d/ns/net is not a network namespace (type %#x, %v)", pid, t, err) //nolint:errorlint // err is nil when the type is wrong: context, not a cause
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat the network namespace of pid %d: %w", pid, err)
	}
	id := netns.ID{Dev: st.Dev, Ino: st.Ino}
	if id == s.hostNS {
		return nil, fmt.Errorf("%w (pid %d)", ErrHostNamespace, pid)
	}
	ip, err := podIP(fmt.Sprintf("/proc/self/fd/%d", ns.Fd()))
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	ok = true
	return &peer{pid: pid, ip: ip, ns: ns, id: id}, nil
}

// podIP returns the global IPv4 address of the namespace at path: the
// first one on an interface that is up, interfaces other than loopback
// first.
func podIP(path string) (netip.Addr, error) {
	var found, onLoopback []netip.Addr
	err := netns.Do(path, func() error {
		ifaces, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, ifc := range ifaces {
			if ifc.Flags&net.FlagUp == 0 {
				continue
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				return err
			}
			for _, a := range addrs {
				n, ok := a.(*net.IPNet)
				if !ok {
					continue
				}
				ip, ok := netip.AddrFromSlice(n.IP)
				if !ok {
					continue
				}
				ip = ip.Unmap()
				if !ip.Is4() || !ip.IsGlobalUnicast() {
					continue
				}
				if ifc.Flags&net.FlagLoopback != 0 {
					onLoopback = append(onLoopback, ip)
				} else {
					found = append(found, ip)
				}
			}
		}
		return nil
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses in the network namespace: %w", err)
	}
	found = append(found, onLoopback...)
	if len(found) == 0 {
		return netip.Addr{}, ErrNoIPv4
	}
	return found[0], nil
}
