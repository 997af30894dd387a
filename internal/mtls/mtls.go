// Package mtls loads the certificates of meshperf's mutual TLS between the
// agents, the coordinator and remote users of its API: TLS 1.3 only, client
// certificates required and verified against a client CA on the server
// side, the server's certificate verified against a CA and the dialed host
// name on the client side. Certificates are read once, at start; a changed
// file takes effect at the next restart.
//
// ServerCredentials also logs every refused handshake with its reason, so
// that an operator sees on the coordinator why an agent was turned away.
package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc/credentials"
)

// File is a file given by a command-line flag, for AllOrNone.
type File struct {
	// Flag is the flag's name without dashes, e.g. "tls-cert".
	Flag string
	// Path is the flag's value; empty means not given.
	Path string
}

// AllOrNone reports whether every file is given. It returns an error naming
// the missing flags when some are given and some not.
func AllOrNone(files ...File) (bool, error) {
	var given, missing []string
	for _, f := range files {
		if f.Path == "" {
			missing = append(missing, "--"+f.Flag)
		} else {
			given = append(given, "--"+f.Flag)
		}
	}
	if len(given) > 0 && len(missing) > 0 {
		return false, fmt.Errorf("%s given without %s: TLS needs all of them or none", strings.Join(given, ", "), strings.Join(missing, ", "))
	}
	return len(missing) == 0, nil
}

// ServerConfig is a TLS 1.3 server configuration that presents the key
// pair in certFile and keyFile (PEM) and requires a client certificate
// signed by a CA in clientCAFile (PEM).
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	pool, err := loadPool(clientCAFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// ClientConfig is a TLS 1.3 client configuration that verifies the server
// against the CAs in caFile (PEM) and the dialed host name, and presents
// the key pair in certFile and keyFile (PEM).
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Always present the certificate, even when the server names other
		// CAs than its issuer: the server then says why it refuses it
		// ("unknown authority"), not that there was none.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		RootCAs:              pool,
	}, nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS key pair %s, %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// ServerCredentials are gRPC transport credentials for cfg that log each
// refused handshake (a missing, expired or foreign client certificate) on
// log at warning level, with the peer's address and the reason; a peer
// that closes the connection before any handshake (a TCP probe) is logged
// at debug level only. A nil log means discard.
func ServerCredentials(cfg *tls.Config, log *slog.Logger) credentials.TransportCredentials {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &loggedServer{TransportCredentials: credentials.NewTLS(cfg), log: log}
}

type loggedServer struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (s *loggedServer) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := s.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		logf := s.log.Warn
		if errors.Is(err, io.EOF) {
			logf = s.log.Debug
		}
		logf("TLS handshake with a client failed; the reason says whose certificate was refused (\"remote error\": the client refused ours)",
			"remote", conn.RemoteAddr().String(), "reason", err)
	}
	return c, info, err
}

func (s *loggedServer) Clone() credentials.TransportCredentials {
	return &loggedServer{TransportCredentials: s.TransportCredentials.Clone(), log: s.log}
}
