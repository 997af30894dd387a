package mtls

import (
	"crypto/tls"
	"fmt"
)

// LoadServer is Load for a server whose clients may go without a
// certificate: CertFile and KeyFile are required, CAFile is optional (no
// client certificate is then asked for). The files are kept current as
// Load's are.
func LoadServer(cfg Config) (*Files, error) {
	if cfg.CAFile != "" {
		return Load(cfg)
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, fmt.Errorf("TLS: certificate %q and key %q: both are needed", cfg.CertFile, cfg.KeyFile)
	}
	return load(cfg)
}

// HTTPServerConfig is a TLS 1.3 configuration for an HTTP server (HTTP/1.1)
// that presents the current key pair. With a CA (Load, or LoadServer with
// CAFile), a client certificate is verified against the current CAs if
// the client presents one, and a connection without one is accepted: the
// handler decides, from the request's VerifiedChains, which paths need one
// (a kubelet's HTTPS probe presents none).
func (f *Files) HTTPServerConfig() *tls.Config {
	conf := func() *tls.Config {
		cert, pool := f.current()
		c := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}}
		if pool != nil {
			c.ClientAuth, c.ClientCAs = tls.VerifyClientCertIfGiven, pool
		}
		return c
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return conf(), nil
		},
	}
}
