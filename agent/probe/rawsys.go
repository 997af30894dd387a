package probe

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The probes' calls on their non-blocking sockets are raw system calls
// (unix.RawSyscall), not unix.Socket, Connect, Sendto, Recvmsg or an
// os.File's Read and Write, which tell the scheduler that the call may
// block (entersyscall). That bookkeeping, made by the first call after
// the process was idle, wakes the runtime's sysmon thread from its deep
// sleep, and sysmon then polls every 20 us for as long as the process
// runs (taking the P away from a call that lasts longer, a loopback
// connect(2) does): at 200 probes a second, a sixth of the agent's CPU
// in deploy/lab's TestProberScale1000. None of these calls blocks:
// every socket is non-blocking, and waiting is done by the runtime's
// poller (SyscallConn's Read and Write) or the TCP prober's own epoll
// instance.

// errnoErr is e as an error, nil for 0.
func errnoErr(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// rawSockaddr is an IPv4 or IPv6 socket address in the kernel's layout.
type rawSockaddr struct {
	v6 unix.RawSockaddrInet6 // large enough for either
	n  uintptr
}

// makeSockaddr encodes ap (port in network byte order). A value, not a
// pointer: the callers' copies stay on their stacks.
func makeSockaddr(ap netip.AddrPort) (sa rawSockaddr) {
	port := (*[2]byte)(unsafe.Pointer(&sa.v6.Port))
	if ap.Addr().Is4() {
		v4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa.v6))
		v4.Family = unix.AF_INET
		v4.Addr = ap.Addr().As4()
		sa.n = unix.SizeofSockaddrInet4
	} else {
		sa.v6.Family = unix.AF_INET6
		sa.v6.Addr = ap.Addr().As16()
		sa.n = unix.SizeofSockaddrInet6
	}
	// Port sits at the same offset in both layouts.
	port[0], port[1] = byte(ap.Port()>>8), byte(ap.Port())
	return sa
}

// rawSocket is socket(2).
func rawSocket(family, typ int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), uintptr(typ), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// rawBind is bind(2).
func rawBind(fd int, ap netip.AddrPort) error {
	sa := makeSockaddr(ap)
	_, _, e := unix.RawSyscall(unix.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa.v6)), sa.n)
	return errnoErr(e)
}

// rawConnect is connect(2); on a non-blocking socket it returns
// EINPROGRESS while the handshake goes on.
func rawConnect(fd int, ap netip.AddrPort) error {
	sa := makeSockaddr(ap)
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa.v6)), sa.n)
	return errnoErr(e)
}

// rawSendto is sendto(2) of b to the IPv4 or IPv6 address dst (a raw socket's).
func rawSendto(fd int, b []byte, dst netip.Addr) error {
	sa := makeSockaddr(netip.AddrPortFrom(dst, 0))
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(b)), 0,
		uintptr(unsafe.Pointer(&sa.v6)), sa.n)
	return errnoErr(e)
}

// rawWrite is write(2).
func rawWrite(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawRead is read(2).
func rawRead(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawClose is close(2).
func rawClose(fd int) {
	_, _, _ = unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// rawSetsockoptInt is setsockopt(2) of an int option.
func rawSetsockoptInt(fd, level, opt, v int) error {
	iv := int32(v)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&iv)), unsafe.Sizeof(iv), 0)
	return errnoErr(e)
}

// rawSetLingerReset sets SO_LINGER to {on, 0 s}: close(2) then aborts
// the connection with a RST instead of a FIN exchange, and no end of it
// waits in TIME_WAIT.
func rawSetLingerReset(fd int) error {
	l := unix.Linger{Onoff: 1, Linger: 0}
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
	return errnoErr(e)
}

// rawSockError returns the socket's pending error (SO_ERROR).
func rawSockError(fd int) error {
	var v int32
	l := uint32(unsafe.Sizeof(v))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_ERROR,
		uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return errnoErr(unix.Errno(v))
}

// rawConnected reports whether the socket has a peer (getpeername(2)
// succeeds): a failed connect has none, and the first wakeup after
// connect(2) may come before the handshake ends.
func rawConnected(fd int) bool {
	var sa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&l)))
	return e == 0
}

// rawRecvmsg is recvmsg(2) into p and oob (not empty); from is the
// sender's IPv4 or IPv6 address (zero for another family).
func rawRecvmsg(fd int, p, oob []byte) (n, oobn int, from netip.Addr, err error) {
	var sa unix.RawSockaddrAny
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	msg := unix.Msghdr{Name: (*byte)(unsafe.Pointer(&sa)), Namelen: unix.SizeofSockaddrAny, Iov: &iov, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), 0)
	if e != 0 {
		return 0, 0, netip.Addr{}, e
	}
	switch sa.Addr.Family {
	case unix.AF_INET:
		from = netip.AddrFrom4((*unix.RawSockaddrInet4)(unsafe.Pointer(&sa)).Addr)
	case unix.AF_INET6:
		from = netip.AddrFrom16((*unix.RawSockaddrInet6)(unsafe.Pointer(&sa)).Addr)
	}
	return int(r), int(msg.Controllen), from, nil
}

// rawEpollCtl is epoll_ctl(2) with id in the event's data (its Fd field,
// which epoll_wait hands back as it was set).
func rawEpollCtl(epfd, op, fd int, events, id uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(id)}
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
	return errnoErr(e)
}

// rawEpollPoll is epoll_wait(2) without waiting (epoll_pwait with a zero
// timeout: no architecture lacks it).
func rawEpollPoll(epfd int, evs []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// eventID is the id rawEpollCtl set on ev.
func eventID(ev *unix.EpollEvent) uint32 { return uint32(ev.Fd) }
