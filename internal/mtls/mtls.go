// Package mtls loads the certificates of meshperf's mutual TLS between the
// agents, the coordinator and remote users of its API: TLS 1.3 only, client
// certificates required and verified against a client CA on the server
// side, the server's certificate verified against a CA and the dialed host
// name on the client side. Files keeps the certificates, keys and CAs
// current with their files (cert-manager renews them in place): new
// handshakes use the new material, open connections keep theirs.
//
// ServerCredentials also logs every refused handshake with its reason, so
// that an operator sees on the coordinator why an agent was turned away.
package mtls

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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
