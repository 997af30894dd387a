// Package httptarget is the HTTP server every agent runs on each of its
// networks (hostNetwork and the pod network) as the target of TEST_HTTP: a
// small, fast, always-up endpoint, so that curl measures the network path
// and not an application.
package httptarget

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"

	"github.com/meshperf/meshperf/internal/httpserve"
)

// MaxBodyBytes bounds the body size a client may ask for with ?bytes=N:
// 1 MiB is plenty to time a transfer, and anyone who reaches the agent may
// ask.
const MaxBodyBytes = 1 << 20

// Handler answers GET / with a short text naming the node and the network,
// or with N zero bytes for GET /?bytes=N (N up to MaxBodyBytes).
func Handler(node, network string) http.Handler {
	body := []byte(fmt.Sprintf("meshperf agent %s %s\n", node, network))
	zeros := make([]byte, 32<<10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD") // required in a 405 (RFC 9110 15.5.6)
			http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query().Get("bytes")
		if q == "" {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
			return
		}
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > MaxBodyBytes {
			http.Error(w, fmt.Sprintf("bytes=%q: want an integer in 0..%d", q, MaxBodyBytes), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(zeros))
			if _, err := w.Write(zeros[:k]); err != nil {
				return
			}
			n -= k
		}
	})
}

// Limits of Serve's server, against whoever reaches the node.
const (
	// WriteTimeout bounds writing one answer: a client that stops reading
	// (a slow reader holding a handler and a socket per request) is cut
	// off; 30 s carries MaxBodyBytes at 35 kB/s.
	WriteTimeout = 30 * time.Second
	// MaxConns bounds the connections served at once; further ones wait
	// in the listener's backlog. http_load (ab) keeps up to 1,000 open.
	MaxConns = 2048
)

// Serve serves h on l until ctx ends, then shuts down (waiting at most 2 s
// for requests in flight). It returns nil after ctx ends, or the serve
// error. At most MaxConns connections are served at once, and each
// answer is written within WriteTimeout.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	return serve(ctx, l, h, WriteTimeout, MaxConns)
}

// serve is Serve with its limits.
func serve(ctx context.Context, l net.Listener, h http.Handler, writeTimeout time.Duration, maxConns int) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: writeTimeout, IdleTimeout: 30 * time.Second}
	// After a 2 s grace the requests still in flight are cut (a client
	// that stopped reading would hold its handler forever); that is
	// expected here, not worth a warning.
	return httpserve.Serve(ctx, srv, netutil.LimitListener(l, maxConns), 2*time.Second, "http target", slog.New(slog.DiscardHandler))
}
