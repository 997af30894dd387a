// Package forward makes a TCP service inside a lab namespace reachable on
// the root namespace's loopback, so that a browser, Prometheus or the
// operator's own tools on the machine can reach the lab's coordinator
// without any route into the lab: the root namespace keeps speaking only
// to 127.0.0.1, and each forwarded connection is dialled from a thread
// inside the lab namespace (agent/netns), so its packets never leave it.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
)

// DefaultMaxConns bounds the connections a Forwarder carries at once when
// Config.MaxConns is zero; more wait in the listen backlog.
const DefaultMaxConns = 64

// Config configures Start.
type Config struct {
	// NetNS is the path of the namespace the target is in, e.g.
	// /run/netns/P-node1; it must not be empty.
	NetNS string
	// Target is the host:port dialled inside NetNS, e.g. 127.0.0.1:9090.
	Target string
	// Listen is the loopback address served in the caller's namespace;
	// empty means 127.0.0.1:0 (a free port). A non-loopback host is
	// refused: the forward is for this machine only.
	Listen string
	// DialTimeout bounds each dial inside NetNS; zero means 5 s.
	DialTimeout time.Duration
	// MaxConns bounds the connections carried at once; zero means
	// DefaultMaxConns.
	MaxConns int
	// Logger receives failed dials; nil means discard.
	Logger *slog.Logger
}

// Forwarder accepts on a loopback address and copies each connection to
// Config.Target inside Config.NetNS. Close stops it and every connection
// it carries.
type Forwarder struct {
	cfg  Config
	l    net.Listener
	log  *slog.Logger
	sem  chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
	done chan struct{}
	once sync.Once
}

// Start listens on cfg.Listen and forwards until ctx ends or Close is
// called. Errors name the field: an empty NetNS or Target, a listen
// address that is not loopback, or a listen that fails.
func Start(ctx context.Context, cfg Config) (*Forwarder, error) {
	if cfg.NetNS == "" {
		return nil, errors.New("forward: NetNS is empty")
	}
	if _, _, err := net.SplitHostPort(cfg.Target); err != nil {
		return nil, fmt.Errorf("forward: Target %q: %w", cfg.Target, err)
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("forward: Listen %q: %w", cfg.Listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("forward: Listen %q: want a loopback address", cfg.Listen)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("forward: MaxConns %d: negative", cfg.MaxConns)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("forward: listen on %s: %w", cfg.Listen, err)
	}
	f := &Forwarder{cfg: cfg, l: l, log: log, sem: make(chan struct{}, cfg.MaxConns), open: map[net.Conn]struct{}{}, done: make(chan struct{})}
	f.wg.Add(2)
	go func() { defer f.wg.Done(); f.accept() }()
	go func() {
		defer f.wg.Done()
		select {
		case <-ctx.Done():
			f.shut()
		case <-f.done:
		}
	}()
	return f, nil
}

// Addr is the loopback host:port the Forwarder serves, e.g.
// 127.0.0.1:41234.
func (f *Forwarder) Addr() string { return f.l.Addr().String() }

// Close stops accepting, closes every forwarded connection and waits for
// the copies to end. It is safe to call more than once.
func (f *Forwarder) Close() error {
	f.shut()
	f.wg.Wait()
	return nil
}

func (f *Forwarder) shut() {
	f.once.Do(func() {
		close(f.done)
		_ = f.l.Close()
		f.mu.Lock()
		for c := range f.open {
			_ = c.Close()
		}
		f.mu.Unlock()
	})
}

// track records c as open, or closes it and returns false after shut.
func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
		_ = c.Close()
		return false
	default:
		f.open[c] = struct{}{}
		return true
	}
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.open, c)
	f.mu.Unlock()
	_ = c.Close()
}

func (f *Forwarder) accept() {
	for {
		select {
		case f.sem <- struct{}{}:
		case <-f.done:
			return
		}
		c, err := f.l.Accept()
		if err != nil {
			<-f.sem
			select {
			case <-f.done:
				return
			default:
			}
			// Out of file descriptors, say: wait a little, go on.
			f.log.Warn("forward: accept failed", "listen", f.l.Addr().String(), "err", err)
			select {
			case <-time.After(100 * time.Millisecond):
				continue
			case <-f.done:
				return
			}
		}
		if !f.track(c) {
			<-f.sem
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() { <-f.sem }()
			defer f.untrack(c)
			f.carry(c)
		}()
	}
}

// carry dials the target inside the namespace and copies both ways until
// either side closes.
func (f *Forwarder) carry(c net.Conn) {
	var up net.Conn
	err := netns.Do(f.cfg.NetNS, func() error {
		var err error
		up, err = net.DialTimeout("tcp", f.cfg.Target, f.cfg.DialTimeout)
		return err
	})
	if err != nil {
		f.log.Warn("forward: dial failed", "netns", f.cfg.NetNS, "target", f.cfg.Target, "err", err)
		return
	}
	if !f.track(up) {
		return
	}
	defer f.untrack(up)
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
}
