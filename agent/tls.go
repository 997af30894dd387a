package agent

import (
	"context"
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// tlsWatch wraps the agent's TLS credentials and remembers why the last
// TLS handshake with the coordinator failed: an error of the handshake
// itself (the coordinator's certificate is not signed by --tls-ca, or is
// not for the dialed host), or an alert the coordinator sent right after
// it (TLS 1.3 clients learn only then that their certificate was refused).
// The reconnect loop logs that reason at error level: a bad certificate
// is misconfiguration, not a network hiccup.
type tlsWatch struct {
	credentials.TransportCredentials
	last *lastTLSError // shared by clones
}

type lastTLSError struct {
	mu  sync.Mutex
	err error
}

func newTLSWatch(c credentials.TransportCredentials) *tlsWatch {
	return &tlsWatch{TransportCredentials: c, last: &lastTLSError{}}
}

func (w *tlsWatch) set(err error) {
	w.last.mu.Lock()
	w.last.err = err
	w.last.mu.Unlock()
}

// take returns the last failure's reason, or nil, and forgets it.
func (w *tlsWatch) take() error {
	if w == nil {
		return nil
	}
	w.last.mu.Lock()
	defer w.last.mu.Unlock()
	err := w.last.err
	w.last.err = nil
	return err
}

func (w *tlsWatch) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := w.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		if ctx.Err() == nil { // not the agent giving up
			w.set(err)
		}
		return c, info, err
	}
	w.set(nil)
	return &alertConn{Conn: c, w: w}, info, nil
}

func (w *tlsWatch) Clone() credentials.TransportCredentials {
	return &tlsWatch{TransportCredentials: w.TransportCredentials.Clone(), last: w.last}
}

// alertConn records a TLS alert from the coordinator, read on the
// connection after the handshake.
type alertConn struct {
	net.Conn
	w *tlsWatch
}

func (c *alertConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	// crypto/tls reports an alert from the peer as a *net.OpError
	// "remote error" (e.g. "tls: unknown certificate authority").
	if oe := (*net.OpError)(nil); err != nil && errors.As(err, &oe) && oe.Op == "remote error" {
		c.w.set(err)
	}
	return n, err
}
