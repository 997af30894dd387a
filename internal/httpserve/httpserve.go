// Package httpserve owns the lifetime of meshperf's HTTP servers (the
// coordinator's metrics endpoint, web UI and pprof, the agent's HTTP
// target): serve on a listener until the context ends, then shut down
// gracefully within a timeout; and the liveness answer the coordinator's
// give (Healthz).
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultShutdownTimeout is Serve's shutdown timeout when zero.
const DefaultShutdownTimeout = 5 * time.Second

// Serve serves srv on l until ctx ends, then shuts srv down: it stops
// accepting at once and waits up to shutdownTimeout (zero means
// DefaultShutdownTimeout) for requests in flight before closing their
// connections. l is closed on return. It returns nil after a stop caused
// by ctx, or the error that ended serving first, prefixed with what (e.g.
// "metrics").
func Serve(ctx context.Context, srv *http.Server, l net.Listener, shutdownTimeout time.Duration, what string, log *slog.Logger) error {
	if shutdownTimeout <= 0 {
		shutdownTimeout = DefaultShutdownTimeout
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("%s: serve %s: %w", what, l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn(what+": graceful stop timed out; closing connections", "timeout", shutdownTimeout, "err", err)
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: serve %s: %w", what, l.Addr(), err)
	}
	return nil
}

// Healthz answers a liveness probe (GET /healthz of the metrics endpoint
// and of the web UI): 200 with "ok\n" as text/plain.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}
