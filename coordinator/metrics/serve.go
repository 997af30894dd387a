package metrics

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshperf/meshperf/internal/httpserve"
)

// Timeouts of the metrics HTTP server.
const (
	// readHeaderTimeout bounds a request's headers (slowloris).
	readHeaderTimeout = 5 * time.Second
	// writeTimeout bounds a response; a scrape takes milliseconds.
	writeTimeout = 30 * time.Second
	// idleTimeout bounds a kept-alive connection between scrapes.
	idleTimeout = 2 * time.Minute
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
	mux.HandleFunc("GET /healthz", httpserve.Healthz)
	return mux
}

// Serve serves Handler on l, over TLS if the Access says so, until ctx
// ends, then shuts the server down:
// it stops accepting at once and waits up to shutdownTimeout (zero means
// 5 s) for scrapes in flight before closing their connections. l is closed
// on return. It returns nil after a stop caused by ctx, or the error that
// ended serving first.
func (m *Metrics) Serve(ctx context.Context, l net.Listener, shutdownTimeout time.Duration) error {
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
	return httpserve.Serve(ctx, srv, l, shutdownTimeout, "metrics", m.log)
}
