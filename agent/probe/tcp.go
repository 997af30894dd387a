package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/agent/netns"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	// EchoDeadline bounds one connection to ServeEcho, from accept to
	// close.
	EchoDeadline = 5 * time.Second
	// EchoConcurrency is how many connections ServeEcho serves at once;
	// further ones wait in the listener's backlog.
	EchoConcurrency = 256
	// echoMax is the most bytes ServeEcho echoes per connection.
	echoMax = 64
)

// ServeEcho is the TCP echo responder peers' PROBE_KIND_TCP probes reach:
// for each connection accepted on ln it reads once (up to 64 bytes),
// writes what it read back and closes, all within EchoDeadline, serving
// at most EchoConcurrency connections at once. It closes ln when ctx ends
// and returns nil once every connection goroutine has ended; it returns
// the accept error (wrapped) if ln fails otherwise.
func ServeEcho(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
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
		wg.Go(func() {
			defer func() { <-sem }()
			stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
			defer stop()
			echoOnce(c)
		})
	}
}

// echoOnce serves one echo connection.
func echoOnce(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(EchoDeadline))
	var b [echoMax]byte
	n, err := c.Read(b[:])
	if n > 0 {
		_, _ = c.Write(b[:n])
	}
	_ = err
}

// dialer dials TCP from one network: in the agent's namespace with a
// net.Dialer, or by creating the socket inside the network's namespace
// (netns.Do only around socket(2): the connect then runs on any thread,
// the socket keeps its namespace).
type dialer struct {
	ns  string
	src netip.Addr
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

// dial connects to dst:port until ctx ends.
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
	family := unix.AF_INET
	if !dst.Is4() {
		family = unix.AF_INET6
	}
	fd := -1
	err := netns.Do(d.ns, func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "tcp-probe") // owns fd from here
	defer f.Close()                           // FileConn dups it
	if d.src.IsValid() && d.src.Is4() == dst.Is4() {
		if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(d.src, 0))); err != nil {
			return nil, fmt.Errorf("bind %s: %w", d.src, err)
		}
	}
	markConnectStart(ctx)
	if err := unix.Connect(fd, sockaddr(raddr)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: os.NewSyscallError("connect", err)}
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = f.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cerr error
	werr := rc.Write(func(fd uintptr) bool {
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			cerr = err
			return true
		}
		if v != 0 {
			cerr = unix.Errno(v)
			return true
		}
		if _, err := unix.Getpeername(int(fd)); err != nil {
			return false // still connecting: wait until writable
		}
		return true
	})
	if werr != nil {
		if errors.Is(werr, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			werr = ctx.Err()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: werr}
	}
	if cerr != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: os.NewSyscallError("connect", cerr)}
	}
	return net.FileConn(f)
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

// tcpProbe connects to the peer's echo responder, writes one byte and
// reads it back; the figure is that byte's round trip.
func tcpProbe(ctx context.Context, d dialer, dst netip.Addr, port uint16) (time.Duration, measurev1.Status, string) {
	c, err := d.dial(ctx, dst, port)
	if err != nil {
		return 0, netStatus(err), err.Error()
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	b := [1]byte{'m'}
	start := time.Now()
	if _, err := c.Write(b[:]); err != nil {
		return 0, netStatus(err), fmt.Sprintf("write to %s: %v", c.RemoteAddr(), err)
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, measurev1.Status_STATUS_TOOL_ERROR, fmt.Sprintf("%s closed the connection without echoing", c.RemoteAddr())
		}
		return 0, netStatus(err), fmt.Sprintf("read from %s: %v", c.RemoteAddr(), err)
	}
	return time.Since(start), measurev1.Status_STATUS_OK, ""
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
