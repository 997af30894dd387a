package coordinator

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// This file opens the coordinator's listeners: the TCP port the agents
// (and remote clients) reach, and the CLI's unix socket.

// listen opens the TCP listener and the unix socket; nil for one not
// configured.
func listen(cfg Config) (tcp, unix net.Listener, err error) {
	if cfg.ListenAddress != "" {
		if tcp, err = net.Listen("tcp", cfg.ListenAddress); err != nil {
			return nil, nil, fmt.Errorf("listen on %s: %w", cfg.ListenAddress, err)
		}
	}
	closeAll := func() {
		if tcp != nil {
			_ = tcp.Close()
		}
	}
	if cfg.SocketPath != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.SocketPath), 0o755); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("socket directory: %w", err)
		}
		// Only ever replace a stale socket: never a file (it could be the
		// store), never a socket a live coordinator answers on.
		if fi, err := os.Lstat(cfg.SocketPath); err == nil && fi.Mode().Type() != os.ModeSocket {
			closeAll()
			return nil, nil, fmt.Errorf("socket path %s exists and is not a socket (%v); refusing to replace it", cfg.SocketPath, fi.Mode().Type())
		}
		if c, err := net.DialTimeout("unix", cfg.SocketPath, time.Second); err == nil {
			_ = c.Close()
			closeAll()
			return nil, nil, fmt.Errorf("socket %s is in use by a running coordinator", cfg.SocketPath)
		}
		if err := os.Remove(cfg.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			closeAll()
			return nil, nil, fmt.Errorf("remove stale socket %s: %w", cfg.SocketPath, err)
		}
		// The socket is the CLI's, with every right of MeshService: it is
		// created 0600 (umask 0177 around bind(2)), so that no other user
		// can connect before the chmod that follows. The umask is the
		// process's: a file created meanwhile gets fewer rights, never more.
		old := syscall.Umask(0o177)
		l, err := net.Listen("unix", cfg.SocketPath)
		syscall.Umask(old)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("listen on %s: %w", cfg.SocketPath, err)
		}
		if err := os.Chmod(cfg.SocketPath, 0o600); err != nil {
			closeAll()
			_ = l.Close()
			return nil, nil, fmt.Errorf("chmod %s: %w", cfg.SocketPath, err)
		}
		unix = l
	}
	return tcp, unix, nil
}
