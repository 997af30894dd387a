package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// probeTimeout bounds the TCP probe that follows qperf's "failed to connect".
const probeTimeout = 3 * time.Second

// probeTCP opens one TCP connection to addr ("IP:port") from the network
// namespace at ns ("" = the agent's own) and closes it at once. It
// returns nil if the connection was accepted, else the dial error. The
// namespace is entered with netns.Do, on a goroutine of its own.
func probeTCP(ctx context.Context, ns, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	dial := func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	if ns == "" {
		return dial()
	}
	// A goroutine of its own: if its thread cannot return to the agent's
	// namespace, netns.Do leaves it locked and it dies with the goroutine.
	done := make(chan error, 1)
	go func() { done <- netns.Do(ns, dial) }()
	return <-done
}

// probeStatus maps a probe's dial error to a status: nil means the port
// accepts connections now (STATUS_OK).
func probeStatus(err error) measurev1.Status {
	var nerr net.Error
	switch {
	case err == nil:
		return measurev1.Status_STATUS_OK
	case errors.Is(err, syscall.ECONNREFUSED):
		return measurev1.Status_STATUS_REFUSED
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return measurev1.Status_STATUS_UNREACHABLE
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &nerr) && nerr.Timeout():
		return measurev1.Status_STATUS_TIMEOUT
	}
	return measurev1.Status_STATUS_UNSPECIFIED
}

// connectRetry is the pause between WaitConnectable's attempts.
const connectRetry = 200 * time.Millisecond

// WaitConnectable waits until a TCP connection to target from the
// namespace of network is accepted: it tries at once, then every 200 ms,
// for at most within (and no longer than ctx). It returns nil once one
// attempt was accepted; otherwise the last attempt's error, wrapped with
// how long it tried, or ctx's error. A network this runner does not have
// is an error at once.
//
// The agent calls it before a client whose target is a ClusterIP: a
// Service just created, or whose EndpointSlice just moved to a new pod IP,
// answers only once the source node's kube-proxy has programmed it, and a
// test started before then would measure that delay, not the network.
func (r *Runner) WaitConnectable(ctx context.Context, network measurev1.Network, target netip.AddrPort, within time.Duration) error {
	netns, ok := r.netns[network]
	if !ok {
		return fmt.Errorf("network %v is not available on this agent", network)
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	retry := time.NewTimer(connectRetry)
	defer retry.Stop()
	for attempts := 1; ; attempts++ {
		err := r.probe(ctx, netns, target.String())
		if err == nil {
			return nil
		}
		if attempts > 1 {
			retry.Reset(connectRetry)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not connectable after %d attempts in %v: %w", target, attempts, time.Since(start).Round(time.Millisecond), err)
		case <-retry.C:
		}
	}
}
