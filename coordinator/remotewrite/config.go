package remotewrite

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/coordinator/apitoken"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/protocol"
)

// Defaults of Config's zero fields.
const (
	// DefaultQueueSamples is Config.QueueSamples' default: 10,000,000
	// samples, 320 MB when full; a 1,000-node full mesh run is about
	// 1,001,000 samples per test (999,000 pairs and 2,000 node figures),
	// so an hour of ten such tests.
	DefaultQueueSamples = 10_000_000
	// DefaultBatchSamples is Config.BatchSamples' default.
	DefaultBatchSamples = 5000
	// DefaultBatchWait is Config.BatchWait's default.
	DefaultBatchWait = 5 * time.Second
	// DefaultTimeout is Config.Timeout's default.
	DefaultTimeout = 30 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff are the retry backoff's
	// defaults.
	DefaultMinBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff is Config.MaxBackoff's default.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultFlushTimeout is Config.FlushTimeout's default.
	DefaultFlushTimeout = 10 * time.Second
)

// ParseURL checks a receiver's URL as given to the flag named flag, by
// the rule of every http URL meshperf takes (protocol.CheckHTTPURL): http
// or https, a host, no user info, no fragment, a valid port. The error
// names the flag and the value.
func ParseURL(flag, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, raw, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("--%s %q: user info in the URL; use --remote-write-bearer-token-file", flag, raw)
	}
	if err := protocol.CheckHTTPURL(u, raw); err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, raw, err)
	}
	return u, nil
}

// check validates cfg and fills in the defaults.
func (cfg *Config) check() error {
	if _, err := ParseURL("remote-write", cfg.URL); err != nil {
		return err
	}
	if cfg.QueueSamples == 0 {
		cfg.QueueSamples = DefaultQueueSamples
	}
	if cfg.BatchSamples == 0 {
		cfg.BatchSamples = DefaultBatchSamples
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"BatchWait", &cfg.BatchWait, DefaultBatchWait},
		{"Timeout", &cfg.Timeout, DefaultTimeout},
		{"MinBackoff", &cfg.MinBackoff, DefaultMinBackoff},
		{"MaxBackoff", &cfg.MaxBackoff, DefaultMaxBackoff},
		{"FlushTimeout", &cfg.FlushTimeout, DefaultFlushTimeout},
	} {
		if *d.v < 0 {
			return fmt.Errorf("remote write %s %v: negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	switch {
	case cfg.QueueSamples < 0:
		return fmt.Errorf("--remote-write-queue-samples %d: negative", cfg.QueueSamples)
	case cfg.BatchSamples < 0:
		return fmt.Errorf("remote write BatchSamples %d: negative", cfg.BatchSamples)
	case cfg.MaxBackoff < cfg.MinBackoff:
		return fmt.Errorf("remote write MaxBackoff %v is below MinBackoff %v", cfg.MaxBackoff, cfg.MinBackoff)
	}
	return nil
}

// client is the HTTP client of cfg: its timeout, CA and bearer token.
func (cfg *Config) client() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--remote-write-ca-file %q: %w", cfg.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--remote-write-ca-file %q: no PEM certificate in it", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var token string
	if cfg.BearerTokenFile != "" {
		b, err := apitoken.ReadFile("remote write bearer token (--remote-write-bearer-token-file)", cfg.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		token = string(b)
	}
	if token != "" {
		if u, err := url.Parse(cfg.URL); err == nil && u.Scheme == "http" && !mtls.LoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("--remote-write %q with --remote-write-bearer-token-file: the token would cross the network in clear; use https (http only to a loopback receiver)", cfg.URL)
		}
	}
	// Redirects are not followed: the token would go to wherever they
	// point, and a 301/302/303 would turn the POST into a GET whose 2xx
	// counts as sent. A 3xx is a rejected batch.
	return &http.Client{Timeout: cfg.Timeout, Transport: &transport{next: tr, token: token, codes: cfg.codes, maxRetryAfter: cfg.MaxBackoff},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// retryAfter is a Retry-After value (seconds or an HTTP date) as a
// delay; 0 when it is neither.
func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second
	}
	if d, err := http.ParseTime(v); err == nil {
		return time.Until(d)
	}
	return 0
}

// maxErrorBody bounds how much of a receiver's answer is read: the
// library reads an error answer whole and puts it in the logged error.
const maxErrorBody = 64 << 10

// transport adds the bearer token, counts responses by status code,
// bounds the answer's body to maxErrorBody and a Retry-After to
// maxRetryAfter.
type transport struct {
	next          http.RoundTripper
	token         string
	codes         func(code string)
	maxRetryAfter time.Duration
}

// limitedBody reads at most maxErrorBody bytes of an answer.
type limitedBody struct {
	io.Reader
	io.Closer
}

// RoundTrip sends req with the token.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.codes("error")
		return nil, err
	}
	t.codes(fmt.Sprint(resp.StatusCode))
	resp.Body = limitedBody{io.LimitReader(resp.Body, maxErrorBody), resp.Body}
	// A Retry-After past the longest backoff is the longest backoff: a
	// receiver cannot stall the sender.
	if ra := resp.Header.Get("Retry-After"); ra != "" && t.maxRetryAfter > 0 && retryAfter(ra) > t.maxRetryAfter {
		resp.Header.Set("Retry-After", strconv.Itoa(int(t.maxRetryAfter/time.Second)))
	}
	return resp, nil
}
