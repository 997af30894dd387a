package servers_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestOrdersWhileStarting: what comes for a test whose server is still
// starting (its process runs, its port does not listen yet) is not lost:
// a second Start with the same work ID is refused whatever the network,
// and a Stop or StopAll cancels the Start and leaves nothing running.
func TestOrdersWhileStarting(t *testing.T) {
	tests := []struct {
		name string
		// act runs while "t1" is starting on the host network.
		act          func(ctx context.Context, m *servers.Manager) error
		wantActIn    string // "" = act succeeds
		wantStartErr error  // nil = the first Start succeeds
		// goneOnAct: when the act returns, the first server's process is
		// gone already (a Stop answers once nothing runs).
		goneOnAct bool
	}{
		{"same work ID on the pod network", func(ctx context.Context, m *servers.Manager) error {
			_, err := m.Start(ctx, "t1", qperf, pod)
			return err
		}, `"t1" already has a server`, nil, false},
		{"same work ID, other tool", func(ctx context.Context, m *servers.Manager) error {
			_, err := m.Start(ctx, "t1", iperf3, host)
			return err
		}, `"t1" already has a server`, nil, false},
		{"Stop", func(_ context.Context, m *servers.Manager) error { return m.Stop("t1") }, "", servers.ErrStopped, true},
		{"StopAll", func(_ context.Context, m *servers.Manager) error { m.StopAll(); return nil }, "", servers.ErrStopped, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, true, 0)
			gq, gi := testutil.NewToolGate(t, "qperf", ""), testutil.NewToolGate(t, "iperf3", "")
			ctx := testnet.Ctx(t, time.Minute)
			startErr := make(chan error, 1)
			go func() {
				_, err := f.m.Start(ctx, "t1", qperf, host)
				startErr <- err
			}()
			testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the first server to begin", func() bool { return len(gq.Started()) == 1 })
			actErr := make(chan error, 1)
			go func() { actErr <- tt.act(ctx, f.m) }()
			// The act either answers while the first Start waits at the
			// gate, or (wrongly) starts a server of its own.
			var err error
			acted := false
			testutil.Expect(t, 15*time.Second, 20*time.Millisecond, "the act to answer or start a server", func() bool {
				select {
				case err = <-actErr:
					acted = true
					return true
				default:
					return len(gq.Started())+len(gi.Started()) > 1
				}
			})
			if tt.goneOnAct && acted {
				if left := slices.DeleteFunc(gq.Started(), func(pid int) bool { return !testutil.ProcAlive(pid) }); len(left) > 0 {
					t.Errorf("process %v of the first server still runs when the act returned", left)
				}
			}
			gq.Release(t)
			gi.Release(t)
			if !acted {
				err = <-actErr
			}
			switch {
			case tt.wantActIn == "" && err != nil:
				t.Errorf("act = %v, want success", err)
			case tt.wantActIn != "" && (err == nil || !strings.Contains(err.Error(), tt.wantActIn)):
				t.Errorf("act = %v, want an error containing %s", err, tt.wantActIn)
			case tt.wantActIn != "" && errors.Is(err, servers.ErrBusy):
				t.Errorf("act = %v, want a duplicate error, not busy", err)
			}
			err = <-startErr
			switch {
			case tt.wantStartErr == nil && err != nil:
				t.Errorf("first Start = %v, want success", err)
			case tt.wantStartErr != nil && !errors.Is(err, tt.wantStartErr):
				t.Errorf("first Start = %v, want %v", err, tt.wantStartErr)
			}
			if tt.wantStartErr == nil {
				if n := f.m.Running(); n != 1 {
					t.Errorf("Running() = %d with the first server up, want 1", n)
				}
				if err := f.m.Stop("t1"); err != nil {
					t.Errorf("Stop: %v", err)
				}
			}
			// Nothing is left: no process, no tracked server, no busy port.
			if n := f.m.Running(); n != 0 {
				t.Errorf("Running() = %d at the end, want 0", n)
			}
			testutil.WaitGone(t, 0, append(append(gq.Started(), gi.Started()...), f.serverPIDs()...))
			for _, network := range []measurev1.Network{host, pod} {
				for _, port := range []uint32{f.ports.Qperf, f.ports.Iperf3} {
					l, err := f.listen(t, network, port)
					if err != nil {
						t.Errorf("port %d in the %v network is not free: %v", port, network, err)
						continue
					}
					_ = l.Close()
				}
			}
			// The work ID is free again.
			if _, err := f.m.Start(ctx, "t1", qperf, pod); err != nil {
				t.Errorf("Start of t1 again: %v", err)
			}
		})
	}
}
