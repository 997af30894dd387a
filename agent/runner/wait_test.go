package runner

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestWaitConnectable(t *testing.T) {
	target := netip.MustParseAddrPort("10.96.0.11:5201")
	tests := []struct {
		name      string
		network   measurev1.Network
		refusals  int // attempts refused before one is accepted
		within    time.Duration
		wantErr   string // "" for nil
		wantTries int
	}{
		{"accepted at once", measurev1.Network_NETWORK_HOST, 0, time.Second, "", 1},
		{"accepted after two refusals", measurev1.Network_NETWORK_POD, 2, 5 * time.Second, "", 3},
		{"never accepted", measurev1.Network_NETWORK_HOST, 1000, 500 * time.Millisecond, "10.96.0.11:5201 not connectable after", 0},
		{"no such network", measurev1.Network_NETWORK_UNSPECIFIED, 0, time.Second, "not available", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fakeRunner(Config{NetNS: map[measurev1.Network]string{measurev1.Network_NETWORK_POD: "/run/netns/pod"}})
			var tries int
			var netnsSeen string
			r.probe = func(_ context.Context, netns, addr string) error {
				tries++
				netnsSeen = netns
				if addr != target.String() {
					t.Errorf("probe of %s, want %s", addr, target)
				}
				if tries <= tt.refusals {
					return syscall.ECONNREFUSED
				}
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := r.WaitConnectable(ctx, tt.network, target, tt.within)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && tt.refusals > 0 && !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("err %v does not wrap the last dial error", err)
			}
			if tt.wantTries > 0 && tries != tt.wantTries {
				t.Errorf("%d attempts, want %d", tries, tt.wantTries)
			}
			if tt.network == measurev1.Network_NETWORK_POD && netnsSeen != "/run/netns/pod" {
				t.Errorf("probed from %q, want the pod namespace", netnsSeen)
			}
		})
	}
}

// TestWaitConnectableReal waits for a loopback port that starts listening
// only after the wait began.
func TestWaitConnectableReal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(l.Addr().String())
	_ = l.Close() // refused until it listens again
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listening := make(chan net.Listener, 1)
	relisten := time.AfterFunc(300*time.Millisecond, func() {
		l, err := net.Listen("tcp", addr.String())
		if err != nil {
			t.Error(err)
		}
		listening <- l
	})
	defer relisten.Stop()
	if err := New(Config{}).WaitConnectable(ctx, measurev1.Network_NETWORK_HOST, addr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if l := <-listening; l != nil {
		_ = l.Close()
	}
}
