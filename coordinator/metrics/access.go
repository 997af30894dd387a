package metrics

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/apitoken"
	"github.com/meshperf/meshperf/internal/safetext"
)

// Access is what GET /metrics asks of a scraper; the zero Access asks
// nothing (plaintext HTTP, no token). GET /healthz asks nothing ever: the
// kubelet's probes present neither a certificate nor a token.
type Access struct {
	// TLS, if set, makes Serve speak TLS with it (internal/mtls
	// Files.HTTPServerConfig: the certificate reloaded as it changes).
	TLS *tls.Config
	// RequireClientCert makes /metrics answer only over a connection whose
	// client certificate TLS verified against the client CA (403
	// otherwise). It needs TLS with a client CA that verifies a
	// certificate if given (tls.VerifyClientCertIfGiven).
	RequireClientCert bool
	// TokenFile, if set, holds the bearer token (one line; surrounding
	// white space ignored) that every GET /metrics must carry as
	// "Authorization: Bearer TOKEN", compared in constant time (401 with
	// WWW-Authenticate otherwise). The file is read again at most every
	// TokenCheckInterval while it changes (a Secret rotated in place); a
	// bad new file keeps the token in use, with a warning. It needs TLS,
	// so that the token never crosses the network in clear.
	TokenFile string
	// TokenCheckInterval is how often at most TokenFile is read again;
	// zero means 10 s.
	TokenCheckInterval time.Duration
}

// SetAccess sets what /metrics asks of its scrapers, before Serve or
// Handler. It reads the token file now: an error names the flag, the file
// and what is wrong.
func (m *Metrics) SetAccess(a Access) error {
	if a.TokenFile != "" && a.TLS == nil {
		return errors.New("metrics: --metrics-token-file needs --metrics-tls-cert and --metrics-tls-key: without TLS the token would cross the network in clear")
	}
	if a.RequireClientCert && (a.TLS == nil) {
		return errors.New("metrics: --metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key")
	}
	if a.TokenCheckInterval <= 0 {
		a.TokenCheckInterval = 10 * time.Second
	}
	var tok *metricsToken
	if a.TokenFile != "" {
		raw, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return fmt.Errorf("%s: %w", metricsTokenWhat, err)
		}
		check, err := parseMetricsToken(a.TokenFile, raw)
		if err != nil {
			return err
		}
		tok = &metricsToken{file: a.TokenFile, every: a.TokenCheckInterval, check: check, raw: raw, checked: time.Now()}
	}
	m.accessMu.Lock()
	m.access, m.token = a, tok
	m.accessMu.Unlock()
	return nil
}

// metricsTokenWhat names the metrics token in errors.
const metricsTokenWhat = "metrics token (--metrics-token-file)"

// parseMetricsToken is a Checker of the token file's content raw, by the
// rule of every token file (apitoken.Parse).
func parseMetricsToken(file string, raw []byte) (*apitoken.Checker, error) {
	tok, err := apitoken.Parse(metricsTokenWhat, file, raw)
	if err != nil {
		return nil, err
	}
	return apitoken.New(tok), nil
}

// metricsToken is the bearer token /metrics requires, kept current with
// its file.
type metricsToken struct {
	file  string
	every time.Duration

	mu      sync.Mutex
	check   *apitoken.Checker // of the token in use
	raw     []byte            // the file's content when last read
	checked time.Time
}

// current is the token's Checker, after reading the file again if the
// check interval has passed; a file that changed and is bad keeps the old
// token (warned once per content).
func (t *metricsToken) current(m *Metrics) *apitoken.Checker {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := time.Now(); now.Sub(t.checked) >= t.every || now.Before(t.checked) {
		t.checked = now
		b, err := os.ReadFile(t.file)
		if err != nil || string(b) != string(t.raw) {
			var check *apitoken.Checker
			var perr error
			if err == nil {
				check, perr = parseMetricsToken(t.file, b)
			}
			switch {
			case err == nil && perr == nil:
				t.check = check
				m.log.Info("metrics token reloaded", "file", t.file)
			case err != nil:
				m.log.Warn("metrics token file cannot be read; keeping the token in use", "file", t.file, "err", err)
			default:
				m.log.Warn("metrics token file changed but cannot be used; keeping the token in use", "file", t.file, "err", perr)
			}
			if err == nil {
				t.raw = b
			}
		}
	}
	return t.check
}

// guard is next behind the checks Access asks for.
func (m *Metrics) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.accessMu.Lock()
		a, tok := m.access, m.token
		m.accessMu.Unlock()
		refuse := func(code int, why string) {
			m.refusals.Warn(m.log, time.Now(), "metrics scrape refused", "remote", r.RemoteAddr, "path", safetext.Cut(r.URL.Path, 128), "status", code, "reason", why)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, "%s\n", why)
		}
		if a.RequireClientCert && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			refuse(http.StatusForbidden, "no client certificate signed by the metrics client CA")
			return
		}
		if tok != nil {
			bearer := func(errCode string) {
				v := `Bearer realm="meshperf metrics"`
				if errCode != "" {
					v += `, error="` + errCode + `"`
				}
				w.Header().Set("WWW-Authenticate", v)
			}
			switch err := tok.current(m).Check(r.Header.Values("Authorization")); {
			case err == nil:
			case errors.Is(err, apitoken.ErrMissing):
				bearer("")
				refuse(http.StatusUnauthorized, "no bearer token")
				return
			case errors.Is(err, apitoken.ErrWrong):
				bearer("invalid_token")
				refuse(http.StatusUnauthorized, "wrong bearer token")
				return
			default: // ErrMany, ErrScheme
				bearer("invalid_request")
				refuse(http.StatusUnauthorized, "authorization is not one bearer token")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
