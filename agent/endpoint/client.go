package endpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"time"
)

// ClientConfig configures Dial.
type ClientConfig struct {
	// Socket is the agent's endpoint socket; empty means DefaultSocket.
	Socket string
	// Hello is what the endpoint says of itself.
	Hello Hello
	// MinBackoff and MaxBackoff bound the wait between tries; zero means
	// 200 ms and 10 s. After a refusal the wait grows; after the agent
	// went away it starts over at MinBackoff; after a newer endpoint
	// replaced this one it is MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives connects, refusals and losses; nil means discard.
	Logger *slog.Logger
}

// Dial is the endpoint's side: it connects to the agent, says hello and
// holds the connection open, reconnecting with backoff and jitter whenever
// it fails or closes, until ctx ends; then it closes the connection and
// returns nil.
func Dial(ctx context.Context, cfg ClientConfig) error {
	if cfg.Socket == "" {
		cfg.Socket = DefaultSocket
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backoff := cfg.MinBackoff
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		wait, err := dialOnce(ctx, cfg, log)
		if ctx.Err() != nil {
			return nil
		}
		switch wait {
		case waitMin:
			backoff = cfg.MinBackoff
		case waitMax:
			backoff = cfg.MaxBackoff
		}
		d := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		log.Warn("no connection to the agent; retrying", "socket", cfg.Socket, "err", err, "in", d.Round(time.Millisecond))
		t.Reset(d)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if wait == waitGrow {
			backoff = min(2*backoff, cfg.MaxBackoff)
		}
	}
}

// How long dialOnce's caller waits before the next try.
const (
	waitGrow = iota // the current backoff, then double it
	waitMin         // the minimum: the agent was there and went away
	waitMax         // the maximum: a newer endpoint replaced this one
)

// dialOnce holds one connection until it ends.
func dialOnce(ctx context.Context, cfg ClientConfig, log *slog.Logger) (wait int, err error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", cfg.Socket)
	if err != nil {
		return waitGrow, err
	}
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := writeLine(c, cfg.Hello); err != nil {
		return waitGrow, fmt.Errorf("send hello: %w", err)
	}
	r := bufio.NewReaderSize(c, maxLine)
	var rep Reply
	if err := readLine(r, &rep); err != nil {
		return waitGrow, fmt.Errorf("read the agent's answer: %w", err)
	}
	if !rep.OK {
		return waitGrow, fmt.Errorf("%w: %s", ErrRefused, rep.Error)
	}
	_ = c.SetDeadline(time.Time{})
	log.Info("connected to the agent: this pod is the node's endpoint", "socket", cfg.Socket, "pod_ip", rep.PodIP)
	var last Reply
	if err := readLine(r, &last); err != nil {
		return waitMin, fmt.Errorf("connection to the agent lost: %w", err)
	}
	if last.Replaced {
		return waitMax, errors.New("a newer endpoint replaced this one: " + last.Error)
	}
	return waitMin, fmt.Errorf("agent dropped the endpoint: %s", last.Error)
}
