package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// serveEcho runs ServeEcho on ln with cfg until the test ends.
func serveEcho(t testing.TB, ln net.Listener, cfg EchoConfig) netip.AddrPort {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ServeEcho(ctx, ln, cfg); err != nil {
			t.Errorf("ServeEcho: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t testing.TB) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return uint16(port)
}

// serveHTTP serves code on a loopback listener until the test ends.
func serveHTTP(t testing.TB, code int) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte("meshperf"))
	}), ReadHeaderTimeout: time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() { _ = srv.Close(); wg.Wait() })
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestTCPAndHTTPProbes: one-byte echo round trips and GETs from the own
// namespace and from inside another one.
func TestTCPAndHTTPProbes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echo := serveEcho(t, ln, EchoConfig{})
	ok, notFound := serveHTTP(t, 200), serveHTTP(t, 404)
	lo := netip.MustParseAddr("127.0.0.1")
	own := dialer{src: lo}

	ns := testnet.NewNetNS(t, "mp-probe")
	nsLn, err := netns.Listen(ns, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nsEcho := serveEcho(t, nsLn, EchoConfig{})
	inNS := dialer{ns: ns, src: lo}
	stocked := dialer{ns: ns, src: lo, stock: newNSSockets(ns)}
	t.Cleanup(stocked.stock.close)

	tests := []struct {
		name string
		run  func(ctx context.Context) (time.Duration, measurev1.Status, string)
		want measurev1.Status
		msg  string
	}{
		{"tcp echo", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return tcpProbeCtx(ctx, own, lo, echo.Port())
		}, measurev1.Status_STATUS_OK, ""},
		{"tcp refused", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return tcpProbeCtx(ctx, own, lo, closedPort(t))
		}, measurev1.Status_STATUS_REFUSED, "connection refused"},
		{"tcp echo inside the namespace", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return tcpProbeCtx(ctx, inNS, lo, nsEcho.Port())
		}, measurev1.Status_STATUS_OK, ""},
		{"the root namespace's listener is not reached from inside", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			if echo.Port() == nsEcho.Port() {
				t.Skip("same port in both namespaces")
			}
			return tcpProbeCtx(ctx, inNS, lo, echo.Port())
		}, measurev1.Status_STATUS_REFUSED, "refused"},
		{"tcp echo inside the namespace, on sockets from stock", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return tcpProbeCtx(ctx, stocked, lo, nsEcho.Port())
		}, measurev1.Status_STATUS_OK, ""},
		{"a socket from stock does not reach the root namespace's listener", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			if echo.Port() == nsEcho.Port() {
				t.Skip("same port in both namespaces")
			}
			return tcpProbeCtx(ctx, stocked, lo, echo.Port())
		}, measurev1.Status_STATUS_REFUSED, "refused"},
		{"http 200", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return httpProbe(ctx, httpClient(own), lo, ok)
		}, measurev1.Status_STATUS_OK, ""},
		{"http 404", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return httpProbe(ctx, httpClient(own), lo, notFound)
		}, measurev1.Status_STATUS_SERVER_ERROR, "HTTP 404 Not Found"},
		{"http refused", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return httpProbe(ctx, httpClient(own), lo, closedPort(t))
		}, measurev1.Status_STATUS_REFUSED, "refused"},
		{"http from inside the namespace", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return httpProbe(ctx, httpClient(inNS), lo, ok)
		}, measurev1.Status_STATUS_REFUSED, "refused"},
		{"http from inside the namespace, on sockets from stock", func(ctx context.Context) (time.Duration, measurev1.Status, string) {
			return httpProbe(ctx, httpClient(stocked), lo, ok)
		}, measurev1.Status_STATUS_REFUSED, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			rtt, st, msg := tt.run(ctx)
			if st != tt.want || !strings.Contains(msg, tt.msg) {
				t.Fatalf("got %v %q, want %v %q", st, msg, tt.want, tt.msg)
			}
			if st == measurev1.Status_STATUS_OK && rtt <= 0 {
				t.Errorf("rtt %v", rtt)
			}
		})
	}
}

// TestTCPProbeTimeout: a peer that connects (the kernel completes the
// handshake on a listener nobody accepts from) but never echoes makes the
// probe time out.
func TestTCPProbeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepted by the kernel, never answered
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, st, msg := tcpProbeCtx(ctx, dialer{}, netip.MustParseAddr("127.0.0.1"), uint16(ln.Addr().(*net.TCPAddr).Port))
	if st != measurev1.Status_STATUS_TIMEOUT {
		t.Fatalf("got %v %q, want STATUS_TIMEOUT", st, msg)
	}
}

// tcpProbeCtx runs one TCP probe on a tcpProber of its own, timing it
// out when ctx ends.
func tcpProbeCtx(ctx context.Context, d dialer, dst netip.Addr, port uint16) (time.Duration, measurev1.Status, string) {
	box := newMailbox(time.Now)
	box.eager.Store(true) // every result wakes
	tp, err := newTCPProber(box)
	if err != nil {
		return 0, measurev1.Status_STATUS_TOOL_ERROR, err.Error()
	}
	done := make(chan struct{})
	go func() { defer close(done); tp.wait() }()
	defer func() { tp.stop(); <-done }()
	id, r, ok := tp.start(d, seriesKey{peer: "p"}, time.Now(), dst, port)
	if !ok {
		return r.rtt, r.status, r.msg
	}
	select {
	case <-box.wake:
	case <-ctx.Done():
		if r, mine := tp.expire(id); mine {
			return r.rtt, r.status, r.msg
		}
		<-box.wake // wait gave it first
	}
	r = box.take(nil)[0]
	return r.rtt, r.status, r.msg
}

// TestTCPProberStopped: stop closes the probes in flight (their results
// are dropped), ends wait and refuses new probes.
func TestTCPProberStopped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepted by the kernel, never answered
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	lo := netip.MustParseAddr("127.0.0.1")
	box := newMailbox(time.Now)
	tp, err := newTCPProber(box)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); tp.wait() }()
	id, r, ok := tp.start(dialer{}, seriesKey{peer: "p"}, time.Now(), lo, port)
	if !ok {
		t.Fatalf("probe not started: %v %s", r.status, r.msg)
	}
	tp.stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("wait ran on 5 s after stop")
	}
	if _, mine := tp.expire(id); mine {
		t.Error("the probe in flight at stop still expires")
	}
	if n := len(box.take(nil)); n != 0 {
		t.Errorf("%d results after stop, want none", n)
	}
	if _, r, ok := tp.start(dialer{}, seriesKey{peer: "p"}, time.Now(), lo, port); ok || r.status != measurev1.Status_STATUS_CANCELED {
		t.Errorf("probe after stop: started %v, %v; want STATUS_CANCELED", ok, r.status)
	}
}

// TestServeEchoStops: ServeEcho returns nil soon after its context ends,
// even with a connection open, and has closed the listener.
func TestServeEchoStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServeEcho(ctx, ln, EchoConfig{}) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("ServeEcho: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ServeEcho did not return within 2 s of its context's end")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the listener still accepts")
	}
}

// TestTCPProbeLeavesNoTimeWait: a probe ends with a RST, so neither the
// responder (which closes first) nor the prober keeps a TIME_WAIT socket
// per probe: /proc/net/tcp lists none on the responder's port after a few
// probes.
func TestTCPProbeLeavesNoTimeWait(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := serveEcho(t, ln, EchoConfig{})
	// Sockets of other processes may sit in TIME_WAIT on the port the
	// kernel just gave the listener (SO_REUSEADDR allows it): count them
	// first, and look for new ones only.
	before := timeWaits(t, ap.Port())
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, st, msg := tcpProbeCtx(ctx, dialer{}, ap.Addr(), ap.Port())
		cancel()
		if st != measurev1.Status_STATUS_OK {
			t.Fatalf("probe: %v %s", st, msg)
		}
	}
	if after := timeWaits(t, ap.Port()); after > before {
		t.Errorf("%d TIME_WAIT sockets on port %d after 5 probes, %d before; want no new one", after, ap.Port(), before)
	}
}

// timeWaits counts the TIME_WAIT sockets whose local or remote port is
// port, from /proc/net/tcp (the test skips without it).
func timeWaits(t *testing.T, port uint16) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	suffix := fmt.Sprintf(":%04X ", port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// local, remote, state: 06 is TCP_TIME_WAIT.
		if len(f) > 3 && f[3] == "06" && (strings.HasSuffix(f[1]+" ", suffix) || strings.HasSuffix(f[2]+" ", suffix)) {
			n++
		}
	}
	return n
}

// TestServeEchoPerSource: a client that holds EchoConcurrency idle
// connections from one address keeps its per-source slots at most
// (EchoPerSource, or EchoConfig.PerSource): the others are reset
// unanswered, and a peer's probe from another address is echoed at once,
// not after the idle ones' EchoDeadline.
func TestServeEchoPerSource(t *testing.T) {
	for _, tt := range []struct {
		perSource, want int
	}{{0, EchoPerSource}, {3, 3}, {EchoConcurrency + 1, EchoPerSource}} {
		t.Run(fmt.Sprint(tt.perSource), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			echo := serveEcho(t, ln, EchoConfig{PerSource: tt.perSource})
			hog := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}}
			var idle []net.Conn
			defer func() {
				for _, c := range idle {
					_ = c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT to mislead TestTCPProbeLeavesNoTimeWait
					_ = c.Close()
				}
			}()
			closed := 0 // the hog's connections cut off: a reset at its connect or its read
			for range EchoConcurrency {
				c, err := hog.Dial("tcp", echo.String())
				switch {
				case errors.Is(err, syscall.ECONNRESET) && len(idle) >= tt.want:
					closed++
					continue
				case err != nil:
					t.Fatal(err)
				}
				idle = append(idle, c)
			}
			ctx, cancel := context.WithTimeout(context.Background(), EchoDeadline/2)
			defer cancel()
			if _, st, msg := tcpProbeCtx(ctx, dialer{src: netip.MustParseAddr("127.0.0.1")}, echo.Addr(), echo.Port()); st != measurev1.Status_STATUS_OK {
				t.Errorf("a peer's probe while the hog holds its connections: %v %q, want OK", st, msg)
			}
			// The ones past the bound were cut off unanswered (a reset,
			// well before EchoDeadline); the first ones wait for a payload.
			deadline := time.Now().Add(EchoDeadline / 5)
			for _, c := range idle[tt.want:] {
				_ = c.SetReadDeadline(deadline)
				if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
					closed++
				}
			}
			if want := EchoConcurrency - tt.want; closed != want {
				t.Errorf("%d of the hog's connections past its %d were closed at once, want %d", closed, tt.want, want)
			}
		})
	}
}
