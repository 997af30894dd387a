// Package web owns the coordinator's web UI (serve --web-listen): the
// pages (Mesh, Pair, Runs, Agents; one HTML shell and vanilla JS modules
// embedded in the binary, nothing fetched from elsewhere) and the
// read-only JSON API under /api/v1/ they fetch. The API reads through the
// same MeshService methods the CLI calls (Source) and computes its views
// with the same domain packages (internal/stats, internal/testcell,
// coordinator/diagnose);
// the mesh's default, the continuous probes' newest period, is each
// node's newest stored report (Probes, store.Store.LatestSamples). With
// an API token, every /api/v1/ request needs "Authorization: Bearer
// TOKEN", checked by coordinator/apitoken as MeshService's calls are. The
// UI can do nothing the token cannot: it only reads.
package web

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator/apitoken"
	"github.com/meshperf/meshperf/internal/httpserve"
	"github.com/meshperf/meshperf/internal/lograte"
	"github.com/meshperf/meshperf/internal/safetext"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

//go:embed assets
var embedded embed.FS

// Assets is the embedded UI: the HTML shell, JS modules and CSS under
// their names (index.html, app.js, ...); exported for tests that check
// what the binary serves.
var Assets, _ = fs.Sub(embedded, "assets")

// Source is what the UI reads: the read-only MeshService methods, with
// the signatures of the gRPC server (coordinator/server.Server implements
// them). Errors are gRPC statuses: NotFound and InvalidArgument are the
// caller's, anything else the coordinator's.
type Source interface {
	// GetRun returns a run with its planned tests.
	GetRun(ctx context.Context, req *meshv1.GetRunRequest) (*meshv1.GetRunResponse, error)
	// ListResults returns a page of results.
	ListResults(ctx context.Context, req *meshv1.ListResultsRequest) (*meshv1.ListResultsResponse, error)
	// ListAgents returns every known agent.
	ListAgents(ctx context.Context, req *meshv1.ListAgentsRequest) (*meshv1.ListAgentsResponse, error)
	// ListRuns returns a page of run headers, newest first.
	ListRuns(ctx context.Context, req *meshv1.ListRunsRequest) (*meshv1.ListRunsResponse, error)
	// ListProbeSeries returns a page of one continuous probe series.
	ListProbeSeries(ctx context.Context, req *meshv1.ListProbeSeriesRequest) (*meshv1.ListProbeSeriesResponse, error)
}

// Config configures New.
type Config struct {
	// Source is where the data comes from; required.
	Source Source
	// Token, if not empty, is the API token every /api/v1/ request must
	// carry as "Authorization: Bearer TOKEN"; empty means no token.
	Token []byte
	// RefreshInterval is how often live pages poll the API (the monitor's
	// shortest interval or the probes' report interval); zero means 10 s.
	RefreshInterval time.Duration
	// TLS, if set, makes Serve speak TLS with it (TLS 1.3, certificates
	// reloaded as they change: internal/mtls); nil means plaintext.
	TLS *tls.Config
	// Hosts, if not empty, are the only host names (without port; case
	// and a trailing dot do not matter) a request's Host may name besides
	// an IP address, e.g. localhost for a plaintext UI without a token: a
	// page from elsewhere that a DNS rebinding points at the UI (through
	// a port-forward on 127.0.0.1, or at its pod IP) names its own host
	// and is refused (421); a Host that is an IP address cannot be
	// rebound, as the browser's origin is then that address. Empty means
	// any.
	Hosts []string
	// Probes, if set, is the continuous probes' newest period: the mesh
	// page's default; nil means the mesh shows runs only.
	Probes *Probes
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives refused requests and server errors; nil discards.
	Logger *slog.Logger
}

// UI is the web UI: an http.Handler.
type UI struct {
	cfg    Config
	log    *slog.Logger
	tokens *apitoken.Checker
	mux    *http.ServeMux
	meshes *meshCache
	reads  singleflight.Group // runData reads by run ID, probe meshes by kind and path
	probes probeCache
	// runReads holds a token per run read in progress (maxRunReads),
	// pairReads per pair chart read (maxPairReads).
	runReads, pairReads chan struct{}
	// refusals bounds the warnings of calls refused for their token.
	refusals lograte.Bucket
}

// New returns the UI, or an error naming a bad Config field.
func New(cfg Config) (*UI, error) {
	if cfg.Source == nil {
		return nil, errors.New("web: Config.Source is required")
	}
	if cfg.RefreshInterval < 0 {
		return nil, fmt.Errorf("web: Config.RefreshInterval %v: want 0 or more", cfg.RefreshInterval)
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	hosts := make([]string, 0, len(cfg.Hosts))
	for _, h := range cfg.Hosts {
		hosts = append(hosts, hostKey(h))
	}
	cfg.Hosts = hosts
	u := &UI{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), meshes: newMeshCache(8), runReads: make(chan struct{}, maxRunReads),
		pairReads: make(chan struct{}, maxPairReads)}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Token) > 0 {
		u.tokens = apitoken.New(cfg.Token)
	}
	shell := func(w http.ResponseWriter, r *http.Request) { u.serveAsset(w, r, "index.html") }
	u.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/mesh", http.StatusFound) })
	for _, p := range []string{"/mesh", "/pair", "/runs", "/runs/{id}", "/compare", "/agents"} {
		u.mux.HandleFunc("GET "+p, shell)
	}
	u.mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) { u.serveAsset(w, r, r.PathValue("name")) })
	u.mux.HandleFunc("GET /healthz", httpserve.Healthz)
	api := map[string]func(*http.Request) (any, error){
		"mesh": u.apiMesh, "pair": u.apiPair, "runs": u.apiRuns, "runs/{id}": u.apiRun,
		"compare": u.apiCompare, "agents": u.apiAgents, "findings": u.apiFindings,
	}
	for p, h := range api {
		u.mux.Handle("GET /api/v1/"+p, u.guard(h))
	}
	u.mux.Handle("/api/", u.guard(func(*http.Request) (any, error) { return nil, errNotFound }))
	return u, nil
}

// Content types of the embedded assets, by extension.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// csp is the Content-Security-Policy of every answer: nothing but the
// coordinator's own scripts, styles and API, no inline script or style,
// no framing.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP serves the pages, the assets and the API with the security
// headers on every answer.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(u.cfg.Hosts) > 0 {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if _, err := netip.ParseAddr(host); err != nil && !slices.Contains(u.cfg.Hosts, hostKey(host)) {
			http.Error(w, fmt.Sprintf("Host %q is not one this UI answers for", r.Host), http.StatusMisdirectedRequest)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	u.mux.ServeHTTP(w, r)
}

func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	ext := name[strings.LastIndexByte(name, '.')+1:]
	ct, ok := contentTypes["."+ext]
	b, err := fs.ReadFile(Assets, name)
	if !ok || err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// errNotFound answers 404.
var errNotFound = errors.New("not found")

// paramError is a bad query parameter: 400 naming it and its value.
type paramError struct {
	name, value, want string
}

func (e *paramError) Error() string {
	return fmt.Sprintf("parameter %s=%q: %s", e.name, e.value, e.want)
}

// guard checks the token, runs h and writes its answer as JSON, or the
// error as {"error": "..."} with its status.
func (u *UI) guard(h func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if u.tokens != nil {
			if err := u.tokens.Check(r.Header.Values("Authorization")); err != nil {
				u.refusals.Warn(u.log, time.Now(), "web API call refused", "path", safetext.Cut(r.URL.Path, 128), "remote", r.RemoteAddr, "reason", err.Error())
				w.Header().Set("WWW-Authenticate", `Bearer realm="meshperf"`)
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": err.Error() + ": the API needs \"Authorization: Bearer TOKEN\" with the coordinator's API token"})
				return
			}
		}
		v, err := h(r)
		if err != nil {
			code := http.StatusInternalServerError
			var pe *paramError
			switch st, _ := status.FromError(err); {
			case errors.As(err, &pe), st.Code() == codes.InvalidArgument:
				code = http.StatusBadRequest
			case errors.Is(err, errNotFound), st.Code() == codes.NotFound:
				code = http.StatusNotFound
			case errors.Is(err, errMeshTooLarge):
				code = http.StatusUnprocessableEntity
			default:
				u.log.Error("web API call failed", "path", r.URL.Path, "err", err)
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

// Timeouts of the web server.
const (
	readHeaderTimeout  = 5 * time.Second
	readRequestTimeout = 10 * time.Second
	writeTimeout       = time.Minute
	idleTimeout        = 2 * time.Minute
)

// Serve serves the UI on l, over TLS if Config.TLS is set, until ctx
// ends, then shuts down: it stops accepting at once and waits up to
// shutdownTimeout (zero means 5 s) for requests in flight. l is closed on
// return. It returns nil after a stop caused by ctx, or the error that
// ended serving first.
func (u *UI) Serve(ctx context.Context, l net.Listener, shutdownTimeout time.Duration) error {
	srv := &http.Server{
		Handler: u, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readRequestTimeout, WriteTimeout: writeTimeout, IdleTimeout: idleTimeout,
		ErrorLog: slog.NewLogLogger(u.log.Handler(), slog.LevelDebug),
	}
	if u.cfg.TLS != nil {
		l = tls.NewListener(l, u.cfg.TLS)
	}
	return httpserve.Serve(ctx, srv, l, shutdownTimeout, "web", u.log)
}

// hostKey is host name h as Config.Hosts compares it: lower-case, without
// a trailing dot ("LocalHost." is "localhost").
func hostKey(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }
