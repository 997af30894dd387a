//go:build fidelity

package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/agent/netns"
	meshprobe "github.com/meshperf/meshperf/agent/probe"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The TCP comparison's bounds (see TestProbeFidelity): the reference
// client's kept connection runs fidKeptRun or fidKeptMax round trips,
// whichever ends first; the fresh-connection echoes alternate between the
// reference client and the prober's probe in fidFreshBlocks blocks of
// fidFreshPerBlock each, a block ending after fidFreshBlockRun at the
// latest.
const (
	fidKeptRun       = time.Second
	fidKeptMax       = 100_000
	fidFreshBlocks   = 4
	fidFreshPerBlock = 250
	fidFreshBlockRun = 2 * time.Second
)

// fidTCP measures one round of TCP on p against the fidelity server in
// p.dstNS: the reference client's kept-connection mean round trip, then
// the fresh-connection echoes of the reference client and of the prober's
// own probe (meshprobe.Single, PROBE_KIND_TCP) to meshprobe.ServeEcho,
// each back to back, in alternating blocks. It fills f's TCP fields.
func fidTCP(t *testing.T, p fidPath, f *fidFigures) {
	t.Helper()
	checkLabNS(t, p.srcNS)
	if !p.dst.Is4() || !p.src.Is4() {
		t.Fatalf("%s: the TCP reference client speaks IPv4 only: %s -> %s", p.name, p.src, p.dst)
	}
	kept, n, err := fidRefKept(p.srcNS, p.src, netip.AddrPortFrom(p.dst, fidKeptPort))
	if err != nil {
		t.Fatalf("%s: reference client, kept connection: %v", p.name, err)
	}
	f.refKept, f.refKeptN = kept.Seconds(), n

	single := meshprobe.NewSingle(meshprobe.Network{NetNS: p.srcNS, IP: p.src})
	defer single.Close()
	echo := netip.AddrPortFrom(p.dst, fidEchoPort)
	var ref, probe []float64
	for block := range fidFreshBlocks {
		end := time.Now().Add(fidFreshBlockRun)
		for i := 0; i < fidFreshPerBlock && time.Now().Before(end); i++ {
			if block%2 == 0 {
				rtt, err := fidRefEcho(p.srcNS, p.src, echo)
				if err != nil {
					t.Fatalf("%s: reference client, fresh connection: %v", p.name, err)
				}
				ref = append(ref, rtt.Seconds())
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			rtt, st, msg := single.Probe(ctx, measurev1.ProbeKind_PROBE_KIND_TCP, echo)
			cancel()
			if st != measurev1.Status_STATUS_OK {
				t.Fatalf("%s: prober TCP probe of %s: %v %s", p.name, echo, st, msg)
			}
			probe = append(probe, rtt.Seconds())
		}
	}
	f.refFresh, f.refFreshN = median(ref), len(ref)
	f.tcp, f.tcpN = median(probe), len(probe)
}

// fidRefSocket returns a blocking TCP socket created in the lab namespace
// nsPath (netns.Do only around socket(2), as the prober's dialer does)
// and bound to src; its connect, reads and writes wait at most a second.
func fidRefSocket(nsPath string, src netip.Addr) (int, error) {
	fd := -1
	if err := netns.Do(nsPath, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		return -1, fmt.Errorf("socket in %s: %w", nsPath, err)
	}
	tv := unix.Timeval{Sec: 1}
	for _, err := range []error{
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv),
		unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}),
	} {
		if err != nil {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("socket from %s: %w", src, err)
		}
	}
	return fd, nil
}

// fidRefConnect connects the blocking socket fd to dst; a signal that
// interrupts connect(2) leaves the handshake going on, and connect(2) is
// called again (EALREADY) until it ends, at most 100,000 times.
func fidRefConnect(fd int, dst netip.AddrPort) error {
	sa := &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}
	err := unix.Connect(fd, sa)
	for i := 0; i < 100_000 && (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EALREADY)); i++ {
		err = unix.Connect(fd, sa)
	}
	if errors.Is(err, unix.EISCONN) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("connect %s: %w", dst, err)
	}
	return nil
}

// fidRefEcho is the reference client's fresh-connection echo, the
// prober's TCP probe written as a C program would: a new blocking socket,
// connect(2), then the round trip timed from before write(2) of one byte
// to after read(2) of its echo, the window the prober's tcpProber times.
func fidRefEcho(nsPath string, src netip.Addr, dst netip.AddrPort) (time.Duration, error) {
	fd, err := fidRefSocket(nsPath, src)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(fd) }()
	if err := fidRefConnect(fd, dst); err != nil {
		return 0, err
	}
	b := []byte{'m'}
	start := time.Now()
	if _, err := writeEINTR(fd, b); err != nil {
		return 0, fmt.Errorf("write to %s: %w", dst, err)
	}
	n, err := readEINTR(fd, b)
	rtt := time.Since(start)
	if n != 1 {
		return 0, fmt.Errorf("read from %s: %d bytes, %w", dst, n, errors.Join(err, errors.New("no echo")))
	}
	return rtt, nil
}

// fidRefKept is the reference client on one kept connection, as qperf
// tcp_lat's client runs: one byte written, its echo read, again, back to
// back, for fidKeptRun or fidKeptMax round trips; it returns the mean
// round trip (the elapsed time over the round trips, as qperf computes its
// latency, which is half of it) and the count.
func fidRefKept(nsPath string, src netip.Addr, dst netip.AddrPort) (time.Duration, int, error) {
	fd, err := fidRefSocket(nsPath, src)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = unix.Close(fd) }()
	if err := fidRefConnect(fd, dst); err != nil {
		return 0, 0, err
	}
	b := []byte{'m'}
	start := time.Now()
	end := start.Add(fidKeptRun)
	n := 0
	for ; n < fidKeptMax; n++ {
		if _, err := writeEINTR(fd, b); err != nil {
			return 0, 0, fmt.Errorf("write to %s: %w", dst, err)
		}
		if k, err := readEINTR(fd, b); k != 1 {
			return 0, 0, fmt.Errorf("read from %s after %d round trips: %d bytes, %w", dst, n, k, errors.Join(err, errors.New("no echo")))
		}
		if n%64 == 63 && time.Now().After(end) {
			n++
			break
		}
	}
	return time.Since(start) / time.Duration(n), n, nil
}
