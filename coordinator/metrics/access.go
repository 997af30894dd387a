package metrics

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

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
		sum, raw, err := readMetricsToken(a.TokenFile)
		if err != nil {
			return err
		}
		tok = &metricsToken{file: a.TokenFile, every: a.TokenCheckInterval, sum: sum, raw: raw, checked: time.Now()}
	}
	m.accessMu.Lock()
	m.access, m.token = a, tok
	m.accessMu.Unlock()
	return nil
}

// readMetricsToken reads the token file: the SHA-256 of its content
// without surrounding white space, which must be one non-empty word, and
// the raw content.
func readMetricsToken(file string) ([sha256.Size]byte, []byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return [sha256.Size]byte{}, nil, fmt.Errorf("metrics token (--metrics-token-file): %w", err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return [sha256.Size]byte{}, nil, fmt.Errorf("metrics token (--metrics-token-file) %s is empty", file)
	case strings.ContainsAny(tok, " \t\r\n"):
		return [sha256.Size]byte{}, nil, fmt.Errorf("metrics token (--metrics-token-file) %s holds white space inside the token: want one line", file)
	}
	return sha256.Sum256([]byte(tok)), b, nil
}

// metricsToken is the bearer token /metrics requires, kept current with
// its file.
type metricsToken struct {
	file  string
	every time.Duration

	mu      sync.Mutex
	sum     [sha256.Size]byte // of the token in use
	raw     []byte            // the file's content when last read
	checked time.Time
}

// current is the token's hash, after reading the file again if the check
// interval has passed; a file that changed and is bad keeps the old token
// (warned once per content).
func (t *metricsToken) current(m *Metrics) [sha256.Size]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := time.Now(); now.Sub(t.checked) >= t.every || now.Before(t.checked) {
		t.checked = now
		b, err := os.ReadFile(t.file)
		if err != nil || string(b) != string(t.raw) {
			sum, _, perr := readMetricsToken(t.file)
			switch {
			case err == nil && perr == nil:
				t.sum = sum
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
	return t.sum
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
			want := tok.current(m)
			bearer := func(errCode string) {
				v := `Bearer realm="meshperf metrics"`
				if errCode != "" {
					v += `, error="` + errCode + `"`
				}
				w.Header().Set("WWW-Authenticate", v)
			}
			vals := r.Header.Values("Authorization")
			if len(vals) == 0 {
				bearer("")
				refuse(http.StatusUnauthorized, "no bearer token")
				return
			}
			scheme, got, ok := strings.Cut(vals[0], " ")
			if len(vals) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") {
				bearer("invalid_request")
				refuse(http.StatusUnauthorized, "authorization is not one bearer token")
				return
			}
			sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				bearer("invalid_token")
				refuse(http.StatusUnauthorized, "wrong bearer token")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
