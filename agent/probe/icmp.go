package probe

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// payload is the bytes every echo carries (a prefix of it); read-only.
var payload = func() []byte {
	b := make([]byte, protocol.MaxMTUBytes)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// waiter is one echo awaiting its reply: the probe it is and when it
// went out.
type waiter struct {
	key   seriesKey
	due   time.Time  // wall clock: the period it belongs to
	dst   netip.Addr // the only source whose reply counts
	sent  time.Time  // monotonic: right before sendto
	stray netip.Addr // a reply with our ID and sequence from another source
}

// pinger owns a network's raw ICMP sockets: echo (whose reader
// demultiplexes every reply by echo ID and sequence) and mtu (don't
// fragment, write only: its ICMP_FILTER drops everything it would read).
// Echoes go out from one goroutine (send; the prober's loop), which also
// times them out (expire); the reader hands each answered echo's result
// over itself. An echo's result is given exactly once: by whichever of
// the reader and expire takes its waiter out of waiting.
type pinger struct {
	echo, mtu *net.IPConn
	v6        bool  // ICMPv6 sockets (ip6:ipv6-icmp): the kernel computes the checksum
	openErr   error // the sockets could not be opened: every ICMP probe fails with it
	id        uint16
	buf       []byte // send's, reused

	mu      sync.Mutex
	seq     uint16
	waiting map[uint16]*waiter
}

// openPinger opens the sockets inside the network's namespace: ICMPv4
// ones bound to n.IP, or with v6 ICMPv6 ones bound to n.IPv6. A failure
// is kept in openErr (the prober still runs its other probes).
func openPinger(n *Network, v6 bool) *pinger {
	var id [2]byte
	_, _ = rand.Read(id[:])
	pg := &pinger{id: binary.BigEndian.Uint16(id[:]), waiting: map[uint16]*waiter{}, v6: v6}
	addr := "0.0.0.0"
	if n.IP.IsValid() && n.IP.Is4() {
		addr = n.IP.String()
	}
	if v6 {
		addr = "::"
		if n.IPv6.IsValid() {
			addr = n.IPv6.String()
		}
	}
	open := func() error {
		var err error
		if pg.echo, err = listenICMP(addr, false, v6); err != nil {
			return err
		}
		if pg.mtu, err = listenICMP(addr, true, v6); err != nil {
			_ = pg.echo.Close()
			pg.echo = nil
			return err
		}
		return nil
	}
	var err error
	if n.NetNS == "" {
		err = open()
	} else {
		err = netns.Do(n.NetNS, open)
	}
	if err != nil {
		what := "ICMP"
		if v6 {
			what = "ICMPv6"
		}
		pg.openErr = fmt.Errorf("open raw %s socket on %v: %w", what, n.Net, err)
	}
	return pg
}

// listenICMP opens one raw ip4:icmp socket bound to addr. An echo socket
// reads only echo replies, destination unreachables and time exceeded; a
// don't-fragment socket reads nothing and sets IP_PMTUDISC_DO. With v6
// it is a raw ip6:ipv6-icmp socket (see listenICMPv6).
func listenICMP(addr string, df, v6 bool) (*net.IPConn, error) {
	if v6 {
		return listenICMPv6(addr, df)
	}
	pc, err := net.ListenPacket("ip4:icmp", addr)
	if err != nil {
		return nil, err
	}
	c := pc.(*net.IPConn)
	filter := ^uint32(1<<uint(ipv4.ICMPTypeEchoReply) | 1<<uint(ipv4.ICMPTypeDestinationUnreachable) | 1<<uint(ipv4.ICMPTypeTimeExceeded))
	if df {
		filter = ^uint32(0)
	}
	return configure(c, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_RAW, unix.ICMP_FILTER, int(int32(filter))); err != nil {
			return err
		}
		if df {
			return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		}
		return setEchoReceive(fd)
	})
}

// configure applies set to the socket of c, a socket listenICMP or
// listenICMPv6 opened; if that fails it closes c.
func configure(c *net.IPConn, set func(fd int) error) (*net.IPConn, error) {
	rc, err := c.SyscallConn()
	if err == nil {
		var serr error
		err = rc.Control(func(fd uintptr) { serr = set(int(fd)) })
		if err == nil {
			err = serr
		}
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("set socket options: %w", err)
	}
	return c, nil
}

// setEchoReceive sets what an echo socket of either family (not a
// don't-fragment one) reads with: a 1 MiB receive buffer, and kernel
// receive timestamps, as iputils ping uses them: the reader's wakeup is
// not part of the round trip.
func setEchoReceive(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20); err != nil {
		return err
	}
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
}

// close closes the sockets; the reader then ends.
func (pg *pinger) close() {
	if pg.echo != nil {
		_ = pg.echo.Close()
		_ = pg.mtu.Close()
	}
}

// read demultiplexes replies until the echo socket is closed, handing the
// result of each echo answered (or refused by an ICMP error) to out.
func (pg *pinger) read(log *slog.Logger, out *mailbox) {
	if pg.echo == nil {
		return
	}
	rc, err := pg.echo.SyscallConn()
	if err != nil {
		log.Warn("read raw ICMP socket", "err", err)
		return
	}
	buf := make([]byte, 1<<16)
	oob := make([]byte, 128)
	for {
		var n, oobn int
		var src netip.Addr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, src, rerr = rawRecvmsg(int(fd), buf, oob)
			return !errors.Is(rerr, unix.EAGAIN) && !errors.Is(rerr, unix.EINTR)
		})
		at := time.Now()
		if err == nil {
			err = rerr
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			log.Warn("read raw ICMP socket", "err", err)
			time.Sleep(10 * time.Millisecond) // no spin on a persistent error
			continue
		}
		at = at.Add(-kernelLag(oob[:oobn], at))
		if !src.IsValid() {
			continue
		}
		b := buf[:n]
		if !pg.v6 {
			b = stripIPv4Header(b) // a raw ICMPv6 socket reads no IP header
		}
		if r, ok := pg.deliver(src, b, at); ok {
			out.put(r)
		}
	}
}

// stripIPv4Header returns b without its IPv4 header: ReadMsgIP, unlike
// ReadFrom, keeps the header a raw socket reads.
func stripIPv4Header(b []byte) []byte {
	if len(b) < 20 || b[0]>>4 != 4 {
		return b
	}
	l := int(b[0]&0x0f) << 2
	if l < 20 || l > len(b) {
		return b
	}
	return b[l:]
}

// maxKernelLag bounds the correction kernelLag makes: a larger one is a
// clock step between the kernel's stamp and the reader's, not a wakeup.
const maxKernelLag = 100 * time.Millisecond

// kernelLag returns how long before now (read right after recvmsg) the
// kernel received the datagram, from its SCM_TIMESTAMPNS control message
// in oob: the wakeup and scheduling delay of the reader goroutine, which
// is not part of the round trip (ping's figure leaves it out too). Both
// stamps are wall-clock readings microseconds apart, so the difference
// is sound even though round trips are otherwise measured on the
// monotonic clock; it is 0 without a stamp or when it is negative or
// above maxKernelLag.
func kernelLag(oob []byte, now time.Time) time.Duration {
	// Parsed in place (unix.ParseSocketControlMessage allocates a slice
	// for every reply), copying the header and the stamp out byte-wise:
	// oob need not be aligned.
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		var h unix.Cmsghdr
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h)), oob)
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS {
			var ts unix.Timespec
			if l-hdr < int(unsafe.Sizeof(ts)) {
				return 0
			}
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), oob[hdr:l])
			lag := now.Round(0).Sub(time.Unix(ts.Unix()))
			if lag < 0 || lag > maxKernelLag {
				return 0
			}
			return lag
		}
		oob = oob[min(unix.CmsgSpace(l-hdr), len(oob)):]
	}
	return 0
}

// deliver handles one ICMP message (without its IP header) read from src
// at at, and returns the result of the echo it answers, if any. An echo
// reply with our ID and a waiting sequence counts only if src is the
// probed destination; from another source it is noted (the probe still
// times out: a dead target must not look alive). An unreachable or
// time-exceeded error quoting one of our echoes fails it.
func (pg *pinger) deliver(src netip.Addr, b []byte, at time.Time) (result, bool) {
	if len(b) < 8 {
		return result{}, false
	}
	if pg.v6 {
		return pg.deliver6(src, b, at)
	}
	switch ipv4.ICMPType(b[0]) {
	case ipv4.ICMPTypeEchoReply:
		return pg.reply(src, b, at)
	case ipv4.ICMPTypeDestinationUnreachable, ipv4.ICMPTypeTimeExceeded:
		m, err := icmp.ParseMessage(1, b)
		if err != nil {
			return result{}, false
		}
		var data []byte
		switch body := m.Body.(type) {
		case *icmp.DstUnreach:
			data = body.Data
		case *icmp.TimeExceeded:
			data = body.Data
		}
		dst, id, seq, ok := quotedEcho(data)
		if !ok || id != pg.id {
			return result{}, false
		}
		msg := fmt.Sprintf("time exceeded, from %s", src)
		if m.Type == ipv4.ICMPTypeDestinationUnreachable {
			msg = fmt.Sprintf("destination unreachable (code %d), from %s", m.Code, src)
			if m.Code == 4 {
				msg = fmt.Sprintf("fragmentation needed, next-hop MTU %d, from %s", binary.BigEndian.Uint16(b[6:8]), src)
			}
		}
		return pg.refused(dst, seq, msg)
	}
	return result{}, false
}

// reply handles an echo reply b (ICMPv4 or ICMPv6) from src read at at.
func (pg *pinger) reply(src netip.Addr, b []byte, at time.Time) (result, bool) {
	// Parsed by hand: the reader's hot path, and an echo reply's
	// header is fixed (type, code, checksum, ID, sequence).
	if binary.BigEndian.Uint16(b[4:6]) != pg.id {
		return result{}, false
	}
	seq := binary.BigEndian.Uint16(b[6:8])
	pg.mu.Lock()
	defer pg.mu.Unlock()
	w := pg.waiting[seq]
	if w == nil {
		return result{}, false
	}
	if w.sent.IsZero() {
		return result{}, false // not sent yet: a forgery
	}
	if src != w.dst {
		w.stray = src
		return result{}, false
	}
	delete(pg.waiting, seq)
	return result{key: w.key, due: w.due, rtt: at.Sub(w.sent), status: measurev1.Status_STATUS_OK}, true
}

// refused fails the echo seq to dst with msg (an ICMP error quoted it).
func (pg *pinger) refused(dst netip.Addr, seq uint16, msg string) (result, bool) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	w := pg.waiting[seq]
	if w == nil || w.dst != dst {
		return result{}, false
	}
	delete(pg.waiting, seq)
	return result{key: w.key, due: w.due, status: measurev1.Status_STATUS_UNREACHABLE, msg: msg}, true
}

// quotedEcho parses the IPv4 datagram an ICMP error quotes: its
// destination and, if it was an echo request, the echo's ID and sequence.
func quotedEcho(d []byte) (dst netip.Addr, id, seq uint16, ok bool) {
	if len(d) < 20 || d[0]>>4 != 4 {
		return netip.Addr{}, 0, 0, false
	}
	ihl := int(d[0]&0x0f) * 4
	if ihl < 20 || len(d) < ihl+8 || d[9] != 1 || d[ihl] != byte(ipv4.ICMPTypeEcho) {
		return netip.Addr{}, 0, 0, false
	}
	dst = netip.AddrFrom4([4]byte(d[16:20]))
	return dst, binary.BigEndian.Uint16(d[ihl+4:]), binary.BigEndian.Uint16(d[ihl+6:]), true
}

// register reserves a free sequence number for w.
func (pg *pinger) register(w *waiter) (uint16, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	for range 1 << 16 {
		pg.seq++
		if pg.waiting[pg.seq] == nil {
			pg.waiting[pg.seq] = w
			return pg.seq, nil
		}
	}
	return 0, errors.New("all 65536 echo sequence numbers are in flight")
}

// send sends one echo of size payload bytes to dst (on the
// don't-fragment socket if df) for the probe key due at due. With ok, the
// echo is in flight: the reader hands over its result, or expire does once
// its timeout has passed (seq and w name it). Without, it could not go out
// and fail is the probe's result.
func (pg *pinger) send(key seriesKey, due time.Time, dst netip.Addr, size int, df bool) (seq uint16, w *waiter, fail result, ok bool) {
	fail = result{key: key, due: due, status: measurev1.Status_STATUS_TOOL_ERROR}
	if pg.openErr != nil {
		fail.msg = pg.openErr.Error()
		return 0, nil, fail, false
	}
	w = &waiter{key: key, due: due, dst: dst}
	seq, err := pg.register(w)
	if err != nil {
		fail.msg = err.Error()
		return 0, nil, fail, false
	}
	var b []byte
	if pg.v6 {
		b = marshalEcho6(pg.buf[:0], pg.id, seq, payload[:size])
	} else {
		b = marshalEcho(pg.buf[:0], pg.id, seq, payload[:size])
	}
	pg.buf = b
	conn := pg.echo
	if df {
		conn = pg.mtu
	}
	// Stamped under the lock the reader takes to read it: the reply may
	// be read before sendto returns (loopback answers inside it).
	pg.mu.Lock()
	w.sent = time.Now()
	pg.mu.Unlock()
	if err := sendTo(conn, b, dst); err != nil {
		if _, mine := pg.expire(seq, w); mine {
			fail.status, fail.msg = sendStatus(err), fmt.Sprintf("send %d-byte echo to %s: %v", len(b)+pg.ipHeader(), dst, err)
			return 0, nil, fail, false
		}
		// The reader took it first (an ICMP error quoting it) and hands
		// over that result; expire will find it gone.
	}
	return seq, w, result{}, true
}

// inFlight reports whether the echo seq's waiter w is still waiting.
func (pg *pinger) inFlight(seq uint16, w *waiter) bool {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.waiting[seq] == w
}

// expire takes the echo seq's waiter w out of waiting, if the reader has
// not; then the echo timed out, and the result says so (naming a stray
// reply), and mine is true. If mine is false the reader has the result.
func (pg *pinger) expire(seq uint16, w *waiter) (r result, mine bool) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.waiting[seq] != w {
		return result{}, false
	}
	delete(pg.waiting, seq)
	m := fmt.Sprintf("no echo reply from %s", w.dst)
	if w.stray.IsValid() {
		m += fmt.Sprintf(" (a reply to it came from %s)", w.stray)
	}
	return result{key: w.key, due: w.due, status: measurev1.Status_STATUS_TIMEOUT, msg: m}, true
}

// marshalEcho appends to b an ICMPv4 echo request (ID, sequence, data)
// with its checksum (RFC 1071).
func marshalEcho(b []byte, id, seq uint16, data []byte) []byte {
	b = append(b, byte(ipv4.ICMPTypeEcho), 0, 0, 0, byte(id>>8), byte(id), byte(seq>>8), byte(seq))
	b = append(b, data...)
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[2:4], ^uint16(sum))
	return b
}

// sendTo sends b to the IPv4 address dst on the raw socket c without
// waiting: a full send buffer is an error (EAGAIN), not a stall of the
// prober's loop, which sends every echo.
func sendTo(c *net.IPConn, b []byte, dst netip.Addr) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = rawSendto(int(fd), b, dst)
		return true
	}); err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("sendto", serr)
	}
	return nil
}

// sendStatus classifies a send error: no route and local refusals
// (EMSGSIZE over the route MTU with don't-fragment, EPERM/EACCES from a
// local firewall) are STATUS_UNREACHABLE, others STATUS_TOOL_ERROR.
func sendStatus(err error) measurev1.Status {
	switch {
	case errors.Is(err, unix.EMSGSIZE), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES),
		errors.Is(err, unix.ENETUNREACH), errors.Is(err, unix.EHOSTUNREACH):
		return measurev1.Status_STATUS_UNREACHABLE
	}
	return measurev1.Status_STATUS_TOOL_ERROR
}
