//go:build fidelity

package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/agent/httptarget"
	meshprobe "github.com/meshperf/meshperf/agent/probe"
)

// fidServerRole is the fidelity server process (serveFidelity).
const fidServerRole = "fidelity"

func init() { serverProcs[fidServerRole] = serveFidelity }

// fidServerLife bounds a fidelity server's life, whatever its parent
// does.
const fidServerLife = 90 * time.Second

// startFidServer starts the test binary again as a fidelity server inside
// the lab namespace p.dstNS (its own process, as a peer agent's servers
// are the peer's: see TestProbeFidelity) and waits until its three ports
// listen. startIn kills it at the latest when the test ends; the caller
// may stop it sooner.
func startFidServer(t *testing.T, p fidPath, node string) *server {
	t.Helper()
	s := startServerProc(t, p.dstNS, fidServerRole, node+" "+p.name)
	for _, port := range []int{fidEchoPort, fidHTTPPort, fidKeptPort} {
		waitListening(t, p.dstNS, "t", port)
	}
	return s
}

// serveFidelity is the fidelity server process: TestProbeFidelity starts
// the test binary as it (startFidServer) inside a target namespace of its
// lab, to serve there for at most fidServerLife, in a process apart from
// the prober's, as a peer agent does: meshprobe.ServeEcho on fidEchoPort,
// agent/httptarget on fidHTTPPort, and on fidKeptPort the kept-connection
// echo that the TCP reference client measures against qperf (keptEcho).
// spec is "NODE NETWORK", the names agent/httptarget's answer carries.
func serveFidelity(spec string) error {
	node, network, _ := strings.Cut(spec, " ")
	ctx, cancel := context.WithTimeout(context.Background(), fidServerLife)
	defer cancel()
	echo, err := net.Listen("tcp", ":"+strconv.Itoa(fidEchoPort))
	if err != nil {
		return err
	}
	web, err := net.Listen("tcp", ":"+strconv.Itoa(fidHTTPPort))
	if err != nil {
		return errors.Join(err, echo.Close())
	}
	kept, err := listenBlocking(fidKeptPort)
	if err != nil {
		return errors.Join(err, echo.Close(), web.Close())
	}
	var g errgroup.Group
	g.Go(func() error {
		if err := meshprobe.ServeEcho(ctx, echo, meshprobe.EchoConfig{}); err != nil {
			return fmt.Errorf("echo responder: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := httptarget.Serve(ctx, web, httptarget.Handler(node, network)); err != nil {
			return fmt.Errorf("http target: %w", err)
		}
		return nil
	})
	g.Go(func() error { keptEcho(ctx, kept); return nil })
	return g.Wait()
}

// listenBlocking returns a blocking TCP listening socket on port (all
// IPv4 addresses of the current namespace) whose accept(2) waits at most
// a second.
func listenBlocking(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	tv := unix.Timeval{Sec: 1}
	for _, err := range []error{
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.Bind(fd, &unix.SockaddrInet4{Port: port}),
		unix.Listen(fd, 16),
	} {
		if err != nil {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("listen on port %d: %w", port, err)
		}
	}
	return fd, nil
}

// keptEcho serves the listening socket ln until ctx ends, one connection
// at a time, as qperf's server serves tcp_lat: on one OS thread, with
// blocking accept(2), read(2) and write(2), it echoes every read back on
// the same connection until the client closes it (or is silent for a
// second). It closes ln.
func keptEcho(ctx context.Context, ln int) {
	runtime.LockOSThread()
	defer func() { _ = unix.Close(ln) }()
	var b [64]byte
	for ctx.Err() == nil {
		c, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
		if err != nil {
			continue // EAGAIN after a second, EINTR: look at ctx again
		}
		tv := unix.Timeval{Sec: 1}
		_ = unix.SetsockoptTimeval(c, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		_ = unix.SetsockoptTimeval(c, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
		for ctx.Err() == nil {
			n, err := readEINTR(c, b[:])
			if n <= 0 || err != nil {
				break
			}
			if _, err := writeEINTR(c, b[:n]); err != nil {
				break
			}
		}
		_ = unix.Close(c)
	}
}

// readEINTR is read(2), again while a signal interrupts it (a socket with
// SO_RCVTIMEO is not restarted: signal(7)).
func readEINTR(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// writeEINTR is write(2), again while a signal interrupts it.
func writeEINTR(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
