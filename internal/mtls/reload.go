package mtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// DefaultCheckInterval is how often, at most, Files looks at its files
// when Config.CheckInterval is zero.
const DefaultCheckInterval = time.Second

// Config names the PEM files of one side of a mutual TLS connection, for
// Load.
type Config struct {
	// CertFile holds the certificate this side presents (PEM; a chain may
	// follow the leaf).
	CertFile string
	// KeyFile holds the private key of CertFile (PEM).
	KeyFile string
	// CAFile holds the CAs that must have signed the peer's certificate
	// (PEM): the client CA on a server, the root CA on a client.
	CAFile string
	// Logger receives an info line on each reload and a warning when a
	// changed file cannot be used; nil means discard.
	Logger *slog.Logger
	// Now is the clock of the reload throttle; nil means time.Now.
	Now func() time.Time
	// CheckInterval is the least time between two looks at the files;
	// zero means DefaultCheckInterval, a negative value every handshake.
	CheckInterval time.Duration
}

// Files is the key pair and the CA pool of one side of meshperf's mutual
// TLS, kept current with their files: at a handshake, if CheckInterval
// has passed since the last look, it stats the files and re-reads those
// that changed (another inode, size or modification time, so both a
// rename over the file and the kubelet's swap of a secret volume's
// "..data" symlink count). A changed file that does not parse, such as a
// half-written one, or a key that does not match the certificate yet,
// leaves the last good material in use and is logged once, as a warning
// naming the file; a successful reload is logged at info level with the
// new certificate's NotAfter. Connections already open keep the material
// of their handshake. Files needs no goroutine and no Close; it is safe
// for concurrent use.
type Files struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	checked time.Time // the last look at the files
	// What the files looked like when last read, whether or not they
	// parsed, so that a bad version is logged once, not at every look.
	pairSeen [2]stamp
	caSeen   stamp
	// The last good material and the PEM it came from.
	cert    *tls.Certificate
	certPEM []byte
	pool    *x509.CertPool
	caPEM   []byte
}

// Load reads cfg's files, all of which must be given and valid, and
// returns them to be kept current.
func Load(cfg Config) (*Files, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" || cfg.CAFile == "" {
		return nil, fmt.Errorf("TLS: certificate %q, key %q and CA %q: all three are needed", cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	}
	return load(cfg)
}

// load is Load and LoadServer once the files they need are named: the
// defaults, the key pair, and the CA pool if CAFile is set.
func load(cfg Config) (*Files, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	f := &Files{cfg: cfg, log: cfg.Logger}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.pairSeen = [2]stamp{statFile(cfg.CertFile), statFile(cfg.KeyFile)}
	if cfg.CAFile != "" {
		f.caSeen = statFile(cfg.CAFile)
	}
	var err error
	if f.cert, f.certPEM, err = loadKeyPair(cfg.CertFile, cfg.KeyFile); err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		if f.pool, f.caPEM, err = loadPool(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	f.checked = cfg.Now()
	return f, nil
}

// current returns the material to use now, reloading what changed if the
// check interval has passed.
func (f *Files) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.cfg.Now(); f.cfg.CheckInterval < 0 || now.Sub(f.checked) >= f.cfg.CheckInterval || now.Before(f.checked) {
		f.checked = now
		f.reloadPair()
		if f.cfg.CAFile != "" { // LoadServer without a client CA
			f.reloadPool()
		}
	}
	return f.cert, f.pool
}

func (f *Files) reloadPair() {
	seen := [2]stamp{statFile(f.cfg.CertFile), statFile(f.cfg.KeyFile)}
	if seen[0].equal(f.pairSeen[0]) && seen[1].equal(f.pairSeen[1]) {
		return
	}
	f.pairSeen = seen
	cert, certPEM, err := loadKeyPair(f.cfg.CertFile, f.cfg.KeyFile)
	if err != nil {
		f.log.Warn("TLS key pair changed but cannot be used; keeping the last good one until the files change again",
			"cert", f.cfg.CertFile, "key", f.cfg.KeyFile, "err", err, "in_use_not_after", f.cert.Leaf.NotAfter)
		return
	}
	if bytes.Equal(certPEM, f.certPEM) { // touched, or the key file alone rewritten
		f.cert = cert
		return
	}
	f.cert, f.certPEM = cert, certPEM
	f.log.Info("TLS certificate reloaded", "cert", f.cfg.CertFile, "subject", cert.Leaf.Subject.String(),
		"serial", cert.Leaf.SerialNumber.String(), "not_after", cert.Leaf.NotAfter)
}

func (f *Files) reloadPool() {
	seen := statFile(f.cfg.CAFile)
	if seen.equal(f.caSeen) {
		return
	}
	f.caSeen = seen
	pool, caPEM, err := loadPool(f.cfg.CAFile)
	if err != nil {
		f.log.Warn("TLS CA changed but cannot be used; keeping the last good one until the file changes again",
			"ca", f.cfg.CAFile, "err", err)
		return
	}
	if bytes.Equal(caPEM, f.caPEM) {
		return
	}
	f.pool, f.caPEM = pool, caPEM
	f.log.Info("TLS CA reloaded", "ca", f.cfg.CAFile, "certificates", countCerts(caPEM), "not_after", earliestNotAfter(caPEM))
}

// ServerConfig is a TLS 1.3 server configuration that presents the
// current key pair and requires a client certificate signed by a current
// CA: each handshake gets a fresh configuration from GetConfigForClient,
// verified by crypto/tls itself.
func (f *Files) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := f.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    pool,
			}, nil
		},
	}
}

// ClientConfig is a TLS 1.3 client configuration that verifies the server
// against the CAs current now and the dialed host name, and presents the
// key pair current at each handshake. Its RootCAs are fixed once made:
// ClientCredentials makes one per handshake.
func (f *Files) ClientConfig() *tls.Config {
	_, pool := f.current()
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Always present the certificate, even when the server names other
		// CAs than its issuer: the server then says why it refuses it
		// ("unknown authority"), not that there was none.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := f.current()
			return cert, nil
		},
		RootCAs: pool,
	}
}

// ClientCredentials are gRPC transport credentials that do each handshake
// with a fresh ClientConfig, through gRPC's own TLS credentials.
func (f *Files) ClientCredentials() credentials.TransportCredentials {
	return &reloadingClient{files: f}
}

// reloadingClient is credentials.NewTLS over the configuration of the
// moment.
type reloadingClient struct {
	files      *Files
	serverName string // OverrideServerName's; "" means the dialed host
}

func (c *reloadingClient) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if c.serverName != "" {
		authority = c.serverName
	}
	return credentials.NewTLS(c.files.ClientConfig()).ClientHandshake(ctx, authority, raw)
}

func (c *reloadingClient) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("mtls: client credentials used on a server")
}

func (c *reloadingClient) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3", ServerName: c.serverName} //nolint:staticcheck // SA1019: still filled for callers that read it
}

func (c *reloadingClient) Clone() credentials.TransportCredentials {
	return &reloadingClient{files: c.files, serverName: c.serverName}
}

//nolint:staticcheck // part of the interface, deprecated there
func (c *reloadingClient) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}

// stamp is what a file looked like: its os.Stat, or the error of it.
type stamp struct {
	info os.FileInfo
	err  string
}

func statFile(name string) stamp {
	fi, err := os.Stat(name) // follows symlinks: a swapped "..data" shows
	if err != nil {
		return stamp{err: err.Error()}
	}
	return stamp{info: fi}
}

func (s stamp) equal(o stamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == nil && o.info == nil && s.err == o.err
	}
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() && s.info.ModTime().Equal(o.info.ModTime())
}

func loadKeyPair(certFile, keyFile string) (*tls.Certificate, []byte, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS key: %w", err)
	}
	if _, err := parseCerts(certPEM); err != nil {
		return nil, nil, fmt.Errorf("TLS certificate %s: %w", certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS key pair %s, %s: %w", certFile, keyFile, err)
	}
	return &cert, certPEM, nil // X509KeyPair sets Leaf
}

func loadPool(caFile string) (*x509.CertPool, []byte, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS CA: %w", err)
	}
	certs, err := parseCerts(b)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS CA %s: %w", caFile, err)
	}
	if len(certs) == 0 {
		return nil, nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, b, nil
}

// parseCerts returns the certificates of a PEM bundle, or an error for
// one that does not parse or a PEM block cut short: AppendCertsFromPEM
// and X509KeyPair skip those, and a half-written bundle must not pass for
// a shorter good one.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			if bytes.Contains(b, []byte("-----BEGIN")) {
				return nil, errors.New("a PEM block is cut short (a half-written file?)")
			}
			return certs, nil
		}
		b = rest
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
}

func countCerts(b []byte) int {
	certs, _ := parseCerts(b)
	return len(certs)
}

func earliestNotAfter(b []byte) time.Time {
	certs, _ := parseCerts(b)
	var t time.Time
	for _, c := range certs {
		if t.IsZero() || c.NotAfter.Before(t) {
			t = c.NotAfter
		}
	}
	return t
}
