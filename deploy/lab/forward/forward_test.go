package forward_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/deploy/lab/forward"
	"github.com/meshperf/meshperf/internal/testnet"
)

func TestStartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  forward.Config
		want string
	}{
		{"no netns", forward.Config{Target: "127.0.0.1:80"}, "NetNS is empty"},
		{"bad target", forward.Config{NetNS: "/run/netns/x", Target: "nope"}, `Target "nope"`},
		{"not loopback", forward.Config{NetNS: "/run/netns/x", Target: "127.0.0.1:80", Listen: "0.0.0.0:0"}, "want a loopback address"},
		{"negative max conns", forward.Config{NetNS: "/run/netns/x", Target: "127.0.0.1:80", MaxConns: -1}, "MaxConns -1"},
		{"bad listen", forward.Config{NetNS: "/run/netns/x", Target: "127.0.0.1:80", Listen: "localhost"}, `Listen "localhost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := forward.Start(context.Background(), tc.cfg)
			if err == nil {
				_ = f.Close()
				t.Fatalf("Start(%+v) = nil error, want %q", tc.cfg, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestForwardReachesNamespace serves HTTP on 127.0.0.1 inside a fresh
// namespace, where the root namespace's loopback has nothing on that port,
// and reads it through the Forwarder.
func TestForwardReachesNamespace(t *testing.T) {
	testnet.Need(t, "ip")
	ns := testnet.NewNetNS(t, "mpfwd")
	l, err := netns.Listen(ns, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "inside") }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := forward.Start(ctx, forward.Config{NetNS: ns, Target: l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 { // several connections, one after the other
		resp, err := client.Get("http://" + f.Addr() + "/")
		if err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(b) != "inside" {
			t.Fatalf("GET %d = %q, want %q", i, b, "inside")
		}
	}
	// A connection held open ends when the Forwarder closes.
	c, err := net.DialTimeout("tcp", f.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a forwarded connection after Close succeeded, want EOF or an error")
	}
	if _, err := net.DialTimeout("tcp", f.Addr(), time.Second); err == nil {
		t.Fatal("dial after Close succeeded, want refused")
	}
}
