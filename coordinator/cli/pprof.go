package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/meshperf/meshperf/internal/httpserve"
)

// servePprof serves Go's runtime profiles (net/http/pprof: /debug/pprof/
// heap, profile, goroutine, ...) on addr until ctx ends, for an operator
// or a benchmark looking into the coordinator's CPU and memory. It is off
// unless --pprof-listen names an address; keep that address on loopback.
// The listener is open when it returns; it fails if addr cannot be bound.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { // ends with ctx
		if err := httpserve.Serve(ctx, srv, l, 2*time.Second, "pprof", log); err != nil {
			log.Warn("pprof server ended", "err", err)
		}
	}()
	log.Info("serving pprof", "address", l.Addr().String())
	return nil
}
