package probe

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// rawServer accepts connections on a loopback listener until the test
// ends and hands each to serve (which owns it).
func rawServer(t *testing.T, serve func(net.Conn)) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return rawServeOn(t, ln, serve)
}

// rawServeOn is rawServer on ln.
func rawServeOn(t *testing.T, ln net.Listener, serve func(net.Conn)) uint16 {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestHTTPProbeRequest: the probe sends one GET / with Connection: close
// and its User-Agent, asks for no compression, and calls each trace hook
// once, in order, from the agent's namespace and from inside another.
func TestHTTPProbeRequest(t *testing.T) {
	reqs := make(chan *http.Request, 1)
	serve := func(c net.Conn) {
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		reqs <- r
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nmeshperf"))
	}
	lo := netip.MustParseAddr("127.0.0.1")
	ns := testnet.NewNetNS(t, "mp-http")
	nsLn, err := netns.Listen(ns, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		d    dialer
		port uint16
	}{
		{"own namespace", dialer{src: lo}, rawServer(t, serve)},
		{"inside a namespace", dialer{ns: ns, src: lo}, rawServeOn(t, nsLn, serve)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var order []string
			trace := &httptrace.ClientTrace{
				ConnectDone:          func(_, _ string, err error) { order = append(order, "connect") },
				WroteRequest:         func(httptrace.WroteRequestInfo) { order = append(order, "wrote") },
				GotFirstResponseByte: func() { order = append(order, "first") },
				PutIdleConn:          func(error) { order = append(order, "closed") },
			}
			ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(context.Background(), trace), 2*time.Second)
			defer cancel()
			rtt, st, msg := httpProbe(ctx, httpClient(tt.d), lo, tt.port)
			if st != measurev1.Status_STATUS_OK || rtt <= 0 {
				t.Fatalf("got %v %v %q, want OK", rtt, st, msg)
			}
			r := <-reqs
			if r.Method != http.MethodGet || r.URL.Path != "/" || !r.Close || r.UserAgent() != "meshperf-probe" || r.Header.Get("Accept-Encoding") != "" {
				t.Errorf("request %s %s close=%v headers %v", r.Method, r.URL, r.Close, r.Header)
			}
			if got := strings.Join(order, " "); got != "connect wrote first closed" {
				t.Errorf("trace hooks %q, want connect, wrote, first, closed", got)
			}
		})
	}
}

// TestHTTPProbeFailures: a server that hangs up, one that never answers
// and one whose headers never end.
func TestHTTPProbeFailures(t *testing.T) {
	hangUp := rawServer(t, func(c net.Conn) { _ = c.Close() })
	silent := rawServer(t, func(c net.Conn) {
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Read(make([]byte, 4096))
		time.Sleep(time.Second)
	})
	endless := rawServer(t, func(c net.Conn) {
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Read(make([]byte, 4096))
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n"))
		line := []byte("X-Filler: " + strings.Repeat("x", 1000) + "\r\n")
		for range 2 * maxHead / len(line) {
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	})
	lo := netip.MustParseAddr("127.0.0.1")
	for _, tt := range []struct {
		name    string
		port    uint16
		timeout time.Duration
		want    measurev1.Status
		msg     string
	}{
		{"hang up", hangUp, 2 * time.Second, measurev1.Status_STATUS_TOOL_ERROR, "connected, then: "},
		{"silent", silent, 200 * time.Millisecond, measurev1.Status_STATUS_TIMEOUT, "connected, then: "},
		{"endless head", endless, 2 * time.Second, measurev1.Status_STATUS_TOOL_ERROR, "reading the answer's head"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			_, st, msg := httpProbe(ctx, httpClient(dialer{src: lo}), lo, tt.port)
			if st != tt.want || !strings.Contains(msg, tt.msg) {
				t.Fatalf("got %v %q, want %v %q", st, msg, tt.want, tt.msg)
			}
		})
	}

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, st, msg := httpProbe(ctx, httpClient(dialer{src: lo}), lo, silent)
		if st != measurev1.Status_STATUS_CANCELED {
			t.Fatalf("got %v %q, want STATUS_CANCELED", st, msg)
		}
	})
}

// TestSingle: Single runs the TCP and HTTP probes and refuses the others.
func TestSingle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echo := serveEcho(t, ln, EchoConfig{})
	lo := netip.MustParseAddr("127.0.0.1")
	web := netip.AddrPortFrom(lo, serveHTTP(t, 200))
	s := NewSingle(Network{IP: lo})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, tt := range []struct {
		kind measurev1.ProbeKind
		ctx  context.Context
		dst  netip.AddrPort
		want measurev1.Status
	}{
		{measurev1.ProbeKind_PROBE_KIND_TCP, ctx, echo, measurev1.Status_STATUS_OK},
		{measurev1.ProbeKind_PROBE_KIND_HTTP, ctx, web, measurev1.Status_STATUS_OK},
		{measurev1.ProbeKind_PROBE_KIND_TCP, context.Background(), echo, measurev1.Status_STATUS_TOOL_ERROR}, // no deadline
		{measurev1.ProbeKind_PROBE_KIND_ICMP, ctx, echo, measurev1.Status_STATUS_TOOL_ERROR},
	} {
		rtt, st, msg := s.Probe(tt.ctx, tt.kind, tt.dst)
		if st != tt.want || (st == measurev1.Status_STATUS_OK) != (rtt > 0) {
			t.Errorf("%v to %v: %v %v %q, want %v", tt.kind, tt.dst, rtt, st, msg, tt.want)
		}
	}
}
