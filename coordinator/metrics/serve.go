package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Timeouts of the metrics HTTP server.
const (
	// readHeaderTimeout bounds a request's headers (slowloris).
	readHeaderTimeout = 5 * time.Second
	// writeTimeout bounds a response; a scrape takes milliseconds.
	writeTimeout = 30 * time.Second
	// idleTimeout bounds a kept-alive connection between scrapes.
	idleTimeout = 2 * time.Minute
	// defaultShutdownTimeout is Serve's shutdown timeout when zero.
	defaultShutdownTimeout = 5 * time.Second
)

// Handler serves GET /metrics (the registry in the Prometheus text or
// OpenMetrics format, as the scraper asks), behind the checks of the
// Access set (SetAccess), and GET /healthz (200 "ok"), open to all.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.guard(promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	}))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Serve serves Handler on l, over TLS if the Access says so, until ctx
// ends, then shuts the server down:
// it stops accepting at once and waits up to shutdownTimeout (zero means
// 5 s) for scrapes in flight before closing their connections. l is closed
// on return. It returns nil after a stop caused by ctx, or the error that
// ended serving first.
func (m *Metrics) Serve(ctx context.Context, l net.Listener, shutdownTimeout time.Duration) error {
	if shutdownTimeout <= 0 {
		shutdownTimeout = defaultShutdownTimeout
	}
	srv := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
	m.accessMu.Lock()
	if conf := m.access.TLS; conf != nil {
		l = tls.NewListener(l, conf)
	}
	m.accessMu.Unlock()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics: serve %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		m.log.Warn("metrics: graceful stop timed out; closing connections", "timeout", shutdownTimeout, "err", err)
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: serve %s: %w", l.Addr(), err)
	}
	return nil
}
