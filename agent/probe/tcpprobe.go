package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// tcpProber runs the TCP probes: the prober's loop starts each one itself
// (socket, bind, connect and, once connected, the one byte written, all
// non-blocking raw calls: see rawsys.go), and one goroutine (wait) over
// a private epoll instance, itself waited on in the runtime's poller,
// sees every probe through: it finishes a connect that did not end
// inside connect(2) and writes the byte, and reads the echo. The figure
// is the byte's round trip, from right before write(2) to the kernel's
// receive stamp of the echo (SO_TIMESTAMPNS, as the ICMP probe and
// iputils ping use: the prober's own wakeup is not part of it; without a
// stamp, to right after the epoll_wait(2) that reported it). Deadlines
// are the loop's (expire); a probe's result is given exactly once, by whichever
// of wait and expire takes it out of conns.
//
// One waiting goroutine instead of one worker per probe in flight: a
// probe hands nothing from goroutine to goroutine (each hand-off woke a
// second thread) and its socket is never an os.File, whose open and close
// go through the scheduler's blocking-syscall path.
type tcpProber struct {
	ep   *os.File // the epoll instance
	epfd int
	out  *mailbox
	oob  []byte // wait's, for the echo's receive stamp

	mu      sync.Mutex
	stopped bool
	id      uint32
	conns   map[uint32]*tcpConn
}

// tcpConn is one TCP probe in flight.
type tcpConn struct {
	fd    int
	key   seriesKey
	due   time.Time
	raddr netip.AddrPort
	start time.Time // monotonic: right before the byte's write(2); zero while connecting
}

// newTCPProber opens the epoll instance; results go to out.
func newTCPProber(out *mailbox) (*tcpProber, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("epoll instance non-blocking: %w", err)
	}
	return &tcpProber{ep: os.NewFile(uintptr(fd), "tcp-probes"), epfd: fd, out: out, oob: make([]byte, 128),
		conns: map[uint32]*tcpConn{}}, nil
}

// result is the finished probe's result: its round trip rtt, status st
// and message msg.
func (c *tcpConn) result(rtt time.Duration, st measurev1.Status, msg string) result {
	return result{key: c.key, due: c.due, rtt: rtt, status: st, msg: msg}
}

// start starts the probe key (due at due) from d to dst:port. With ok it
// is in flight, named id (for expire); without, r is its result.
func (tp *tcpProber) start(d dialer, key seriesKey, due time.Time, dst netip.Addr, port uint16) (id uint32, r result, ok bool) {
	c := &tcpConn{key: key, due: due, raddr: netip.AddrPortFrom(dst, port)}
	fd, err := d.rawSocket(dst)
	if err != nil {
		return 0, c.result(0, netStatus(err), fmt.Sprintf("dial tcp %s: %v", c.raddr, err)), false
	}
	c.fd = fd
	// Kernel receive stamps on the echo; without them (an old kernel)
	// the round trip ends when wait sees it.
	_ = rawSetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	// The probe ends with a RST: no FIN exchange, and the responder,
	// which closed first, keeps no TIME_WAIT socket per probe (5,000
	// peers every 10 s would hold 30,000 of them on every node).
	_ = rawSetLingerReset(fd)
	events := uint32(unix.EPOLLIN)
	switch err := rawConnect(fd, c.raddr); {
	case err == nil || errors.Is(err, unix.EINPROGRESS) && rawConnected(fd):
		// On loopback the handshake ends inside connect(2).
		if r, ok := c.send(); !ok {
			rawClose(fd)
			return 0, r, false
		}
	case errors.Is(err, unix.EINPROGRESS):
		if err := rawSockError(fd); err != nil {
			rawClose(fd)
			return 0, c.dialFailed(err), false
		}
		events = unix.EPOLLOUT // the write waits until the handshake ends
	default:
		rawClose(fd)
		return 0, c.dialFailed(err), false
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.stopped {
		rawClose(fd)
		return 0, c.result(0, measurev1.Status_STATUS_CANCELED, "the prober stopped"), false
	}
	for tp.id++; tp.id == 0 || tp.conns[tp.id] != nil; tp.id++ { //nolint:revive // empty-block: the loop's clauses find the next free ID
	}
	if err := rawEpollCtl(tp.epfd, unix.EPOLL_CTL_ADD, fd, events, tp.id); err != nil {
		rawClose(fd)
		return 0, c.result(0, measurev1.Status_STATUS_TOOL_ERROR, fmt.Sprintf("epoll_ctl: %v", err)), false
	}
	tp.conns[tp.id] = c
	return tp.id, result{}, true
}

// dialFailed is the result of a connect that failed with err.
func (c *tcpConn) dialFailed(err error) result {
	return c.result(0, netStatus(err), fmt.Sprintf("dial tcp %s: connect: %v", c.raddr, err))
}

// send writes the byte on the connected socket, stamping the start.
func (c *tcpConn) send() (result, bool) {
	c.start = time.Now()
	if _, err := rawWrite(c.fd, []byte{'m'}); err != nil {
		return c.result(0, netStatus(err), fmt.Sprintf("write to %s: %v", c.raddr, err)), false
	}
	return result{}, true
}

// wait handles the probes' socket events until stop.
func (tp *tcpProber) wait() {
	rc, err := tp.ep.SyscallConn()
	if err != nil {
		return
	}
	evs := make([]unix.EpollEvent, 64)
	var rs []result
	for {
		n := 0
		var perr error
		var at time.Time
		err := rc.Read(func(uintptr) bool {
			for n, perr = rawEpollPoll(tp.epfd, evs); errors.Is(perr, unix.EINTR); {
				n, perr = rawEpollPoll(tp.epfd, evs)
			}
			at = time.Now() // every echo of the batch had come by now
			return n > 0 || perr != nil
		})
		if err != nil || perr != nil {
			return // stopped (the epoll instance is closed), or broken: the probes in flight time out
		}
		rs = rs[:0]
		tp.mu.Lock()
		for i := range evs[:n] {
			if r, done := tp.handle(&evs[i], at); done {
				rs = append(rs, r)
			}
		}
		tp.mu.Unlock()
		for _, r := range rs {
			tp.out.put(r)
		}
	}
}

// handle handles one event (under mu), polled at at: the end of a
// connect (then the byte goes out) or the echo (or an error); done says
// r is the probe's result and the socket is closed. An echo's round trip
// ends at its kernel receive stamp, or else at at (not after the reads
// of the events polled before it).
func (tp *tcpProber) handle(ev *unix.EpollEvent, at time.Time) (r result, done bool) {
	id := eventID(ev)
	c := tp.conns[id]
	if c == nil {
		return result{}, false // expired meanwhile
	}
	if c.start.IsZero() {
		if !rawConnected(c.fd) {
			err := rawSockError(c.fd)
			if err == nil && ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) == 0 {
				return result{}, false // not yet
			}
			if err == nil {
				err = unix.ENOTCONN
			}
			r = c.dialFailed(err)
		} else if rr, ok := c.send(); !ok {
			r = rr
		} else if err := rawEpollCtl(tp.epfd, unix.EPOLL_CTL_MOD, c.fd, unix.EPOLLIN, id); err != nil {
			r = c.result(0, measurev1.Status_STATUS_TOOL_ERROR, fmt.Sprintf("epoll_ctl: %v", err))
		} else {
			return result{}, false
		}
	} else {
		var b [1]byte
		n, oobn, _, err := rawRecvmsg(c.fd, b[:], tp.oob)
		end := at
		if err == nil {
			now := time.Now()
			if lag := kernelLag(tp.oob[:oobn], now); lag > 0 {
				end = now.Add(-lag)
			}
		}
		rtt := end.Sub(c.start)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return result{}, false
		case err != nil:
			r = c.result(0, netStatus(err), fmt.Sprintf("read from %s: %v", c.raddr, err))
		case n == 0:
			r = c.result(0, measurev1.Status_STATUS_TOOL_ERROR, fmt.Sprintf("%s closed the connection without echoing", c.raddr))
		default:
			r = c.result(rtt, measurev1.Status_STATUS_OK, "")
		}
	}
	delete(tp.conns, id)
	rawClose(c.fd) // leaves the epoll instance with it
	return r, true
}

// inFlight reports whether probe id is still in flight.
func (tp *tcpProber) inFlight(id uint32) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.conns[id] != nil
}

// expire times out probe id if it is still in flight: mine says r is its
// result; otherwise wait has given it.
func (tp *tcpProber) expire(id uint32) (r result, mine bool) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	c := tp.conns[id]
	if c == nil {
		return result{}, false
	}
	delete(tp.conns, id)
	rawClose(c.fd)
	if c.start.IsZero() {
		return c.result(0, measurev1.Status_STATUS_TIMEOUT, fmt.Sprintf("dial tcp %s: i/o timeout", c.raddr)), true
	}
	return c.result(0, measurev1.Status_STATUS_TIMEOUT, fmt.Sprintf("read from %s: i/o timeout", c.raddr)), true
}

// stop closes the epoll instance (wait returns) and every probe's socket,
// and refuses new probes; their results are dropped.
func (tp *tcpProber) stop() {
	_ = tp.ep.Close()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.stopped = true
	for id, c := range tp.conns {
		rawClose(c.fd)
		delete(tp.conns, id)
	}
}

// rawSocket returns a non-blocking TCP socket for dst's family, created
// in d's namespace (newSocket) and bound to d.src when it is of dst's
// family. The caller owns the descriptor.
func (d dialer) rawSocket(dst netip.Addr) (int, error) {
	family := unix.AF_INET
	if !dst.Is4() {
		family = unix.AF_INET6
	}
	fd, err := d.newSocket(family)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if d.src.IsValid() && d.src.Is4() == dst.Is4() {
		// The port is chosen at connect(2), for the 4-tuple, not here
		// from the whole ephemeral range.
		_ = rawSetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		if err := rawBind(fd, netip.AddrPortFrom(d.src, 0)); err != nil {
			rawClose(fd)
			return -1, fmt.Errorf("bind %s: %w", d.src, err)
		}
	}
	return fd, nil
}
