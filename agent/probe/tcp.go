package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	// EchoDeadline bounds one connection to ServeEcho, from accept to
	// close.
	EchoDeadline = 5 * time.Second
	// EchoConcurrency is how many connections ServeEcho serves at once;
	// further ones wait in the listener's backlog.
	EchoConcurrency = 256
	// EchoPerSource is how many of them one source IP may hold: a peer's
	// probe holds one for a round trip, so a client that keeps more open
	// (idle connections, a port scanner) is cut off at once rather than
	// taking the slots the peers' probes need, which would make the node
	// look unreachable over TCP.
	EchoPerSource = 8
	// echoMax is the most bytes ServeEcho echoes per connection.
	echoMax = 64
)

// EchoConfig configures ServeEcho.
type EchoConfig struct {
	// PerSource is how many connections one source IP may hold at once,
	// 1..EchoConcurrency; zero means EchoPerSource. Only a responder that
	// stands for many peers probed from one address (a test's simulated
	// fleet) needs more.
	PerSource int
}

// ServeEcho is the TCP echo responder peers' PROBE_KIND_TCP probes reach:
// for each connection accepted on ln it reads once (up to 64 bytes),
// writes what it read back and closes, all within EchoDeadline, serving
// at most EchoConcurrency connections at once and cfg.PerSource of one
// source IP (a connection beyond is reset unanswered). It closes ln when
// ctx ends and returns nil once every connection goroutine has ended; it
// returns the accept error (wrapped) if ln fails otherwise.
func ServeEcho(ctx context.Context, ln net.Listener, cfg EchoConfig) error {
	if cfg.PerSource <= 0 || cfg.PerSource > EchoConcurrency {
		cfg.PerSource = EchoPerSource
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sources := sourceCounts{max: cfg.PerSource}
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	sem := make(chan struct{}, EchoConcurrency)
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			_ = ln.Close()
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			<-sem
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			_ = ln.Close()
			return fmt.Errorf("echo responder on %s: %w", ln.Addr(), err)
		}
		src := remoteIP(c)
		if !sources.take(src) {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset: no TIME_WAIT for each connection cut off
			}
			_ = c.Close()
			<-sem
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			defer sources.give(src)
			stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
			defer stop()
			echoOnce(c)
		})
	}
}

// sourceCounts counts ServeEcho's connections by source IP.
type sourceCounts struct {
	max int // per source IP
	mu  sync.Mutex
	n   map[netip.Addr]int
}

// take counts a connection from ip, unless ip holds max.
func (s *sourceCounts) take(ip netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[netip.Addr]int{}
	}
	if s.n[ip] >= s.max {
		return false
	}
	s.n[ip]++
	return true
}

// give ends a connection take counted.
func (s *sourceCounts) give(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[ip]--; s.n[ip] <= 0 {
		delete(s.n, ip)
	}
}

// remoteIP is c's peer address; the zero Addr (one count for all) if it
// has none.
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// echoOnce serves one echo connection.
func echoOnce(c net.Conn) {
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(EchoDeadline))
	var b [echoMax]byte
	n, err := c.Read(b[:])
	if n > 0 {
		_, _ = c.Write(b[:n])
	}
	_ = err
}

// dialer dials TCP from one network: in the agent's namespace with a
// net.Dialer, or on a socket created inside the network's namespace (the
// connect then runs on any thread: the socket keeps its namespace), from
// stock when it has one (see nsSockets).
type dialer struct {
	ns    string
	src   netip.Addr
	stock *nsSockets // nil: netns.Do around each socket(2)
}

// connectStartKey is the context key of a *time.Time that dial sets to
// the moment it starts connecting: after the socket exists (inside the
// namespace) and is bound, right before connect(2). Entering a namespace
// costs a few hundred microseconds on a busy machine; a probe whose
// figure includes the connection (HTTP, like curl's time_total) starts
// its clock there, not before the namespace switch, which no real tool
// run inside the namespace pays.
type connectStartKey struct{}

// markConnectStart records the start of connect(2) in ctx's
// connectStartKey, if it has one.
func markConnectStart(ctx context.Context) {
	if p, ok := ctx.Value(connectStartKey{}).(*time.Time); ok {
		*p = time.Now()
	}
}

// dial connects to dst:port until ctx ends (the HTTP probe's transport).
func (d dialer) dial(ctx context.Context, dst netip.Addr, port uint16) (net.Conn, error) {
	raddr := netip.AddrPortFrom(dst, port)
	if d.ns == "" {
		nd := net.Dialer{}
		if d.src.IsValid() && d.src.Is4() == dst.Is4() {
			nd.LocalAddr = &net.TCPAddr{IP: d.src.AsSlice()}
		}
		markConnectStart(ctx)
		return nd.DialContext(ctx, "tcp", raddr.String())
	}
	f, err := d.socket(dst)
	if err != nil {
		return nil, err
	}
	// The net.Conn is made before connect(2): its dup and its poller
	// registration are not part of the figure (curl pays neither).
	c, err := net.FileConn(f)
	_ = f.Close() // FileConn dups it
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", raddr, err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s: a %T, not a TCP connection", raddr, c)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = tc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	markConnectStart(ctx)
	if err := connect(tc, raddr); err != nil {
		_ = tc.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: err}
	}
	if !stop() { // ctx ended meanwhile: the deadline in the past stays
		_ = tc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: ctx.Err()}
	}
	_ = tc.SetDeadline(time.Time{}) // the HTTP client bounds the rest by ctx
	return peerConn{TCPConn: tc, peer: net.TCPAddrFromAddrPort(raddr)}, nil
}

// peerConn is a connection made from a socket before it connected, which
// therefore does not know its peer: RemoteAddr gives it.
type peerConn struct {
	*net.TCPConn
	peer net.Addr
}

// RemoteAddr returns the peer's address.
func (c peerConn) RemoteAddr() net.Addr { return c.peer }

// socket returns a non-blocking TCP socket for dst's family, created in
// d's namespace (newSocket) and bound to d.src when it is of dst's
// family. The caller owns the file.
func (d dialer) socket(dst netip.Addr) (*os.File, error) {
	family := unix.AF_INET
	if !dst.Is4() {
		family = unix.AF_INET6
	}
	fd, err := d.newSocket(family)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if d.src.IsValid() && d.src.Is4() == dst.Is4() {
		if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(d.src, 0))); err != nil {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("bind %s: %w", d.src, err)
		}
	}
	return os.NewFile(uintptr(fd), "tcp-probe"), nil
}

// connect connects the non-blocking socket f to raddr, waiting (in the
// runtime's poller, until f's deadline) for the handshake to end.
func connect(f syscall.Conn, raddr netip.AddrPort) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		if err := unix.Connect(int(fd), sockaddr(raddr)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			cerr = os.NewSyscallError("connect", err)
		}
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	werr := rc.Write(func(fd uintptr) bool {
		if connected(int(fd)) {
			return true // on loopback, the handshake ended inside connect(2)
		}
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			cerr = err
		case v != 0:
			cerr = unix.Errno(v)
		default:
			return false // still connecting: wait until writable
		}
		return true
	})
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return os.NewSyscallError("connect", cerr)
	}
	return nil
}

// connected reports whether the socket fd has a peer: a failed connect
// has none (SO_ERROR says why), and the first wakeup after connect(2) on
// a non-blocking socket may come before the handshake ends.
func connected(fd int) bool {
	_, err := unix.Getpeername(fd)
	return err == nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

// netStatus classifies a dial, read or write error.
func netStatus(err error) measurev1.Status {
	var ne net.Error
	switch {
	case errors.Is(err, unix.ECONNREFUSED):
		return measurev1.Status_STATUS_REFUSED
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, unix.ETIMEDOUT),
		errors.As(err, &ne) && ne.Timeout():
		return measurev1.Status_STATUS_TIMEOUT
	case errors.Is(err, unix.EHOSTUNREACH), errors.Is(err, unix.ENETUNREACH), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return measurev1.Status_STATUS_UNREACHABLE
	case errors.Is(err, context.Canceled):
		return measurev1.Status_STATUS_CANCELED
	}
	return measurev1.Status_STATUS_TOOL_ERROR
}
