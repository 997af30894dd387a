package servers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// gate holds a server in its start: it puts a stand-in for a tool first
// in PATH that records its PID, waits until the test opens the gate and
// then execs the real tool (same PID, same process group).
type gate struct{ dir, open string }

func newGate(t *testing.T, tool string) *gate {
	t.Helper()
	toolPath, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s is not installed", tool)
	}
	dir := t.TempDir()
	g := &gate{dir: dir, open: filepath.Join(dir, "open")}
	script := fmt.Sprintf("#!/bin/sh\n: > '%s/started.'$$\nwhile [ ! -e '%s' ]; do sleep 0.01; done\nexec '%s' \"$@\"\n", dir, g.open, toolPath)
	if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return g
}

// started returns the PIDs of the stand-ins that began.
func (g *gate) started() []int {
	files, _ := filepath.Glob(filepath.Join(g.dir, "started.*"))
	var pids []int
	for _, f := range files {
		if pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Ext(f), ".")); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (g *gate) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(g.open, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOrdersWhileStarting: what comes for a test whose server is still
// starting (its process runs, its port does not listen yet) is not lost:
// a second Start with the same test ID is refused whatever the network,
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
		{"same test ID on the pod network", func(ctx context.Context, m *servers.Manager) error {
			_, err := m.Start(ctx, "t1", qperf, pod)
			return err
		}, `"t1" already has a server`, nil, false},
		{"same test ID, other tool", func(ctx context.Context, m *servers.Manager) error {
			_, err := m.Start(ctx, "t1", iperf3, host)
			return err
		}, `"t1" already has a server`, nil, false},
		{"Stop", func(_ context.Context, m *servers.Manager) error { return m.Stop("t1") }, "", servers.ErrStopped, true},
		{"StopAll", func(_ context.Context, m *servers.Manager) error { m.StopAll(); return nil }, "", servers.ErrStopped, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, true, 0)
			gq, gi := newGate(t, "qperf"), newGate(t, "iperf3")
			ctx := testnet.Ctx(t, time.Minute)
			startErr := make(chan error, 1)
			go func() {
				_, err := f.m.Start(ctx, "t1", qperf, host)
				startErr <- err
			}()
			waitFor(t, "the first server to begin", func() bool { return len(gq.started()) == 1 })
			actErr := make(chan error, 1)
			go func() { actErr <- tt.act(ctx, f.m) }()
			// The act either answers while the first Start waits at the
			// gate, or (wrongly) starts a server of its own.
			var err error
			acted := false
			waitFor(t, "the act to answer or start a server", func() bool {
				select {
				case err = <-actErr:
					acted = true
					return true
				default:
					return len(gq.started())+len(gi.started()) > 1
				}
			})
			if tt.goneOnAct && acted {
				if left := slices.DeleteFunc(gq.started(), func(pid int) bool { return !alive(pid) }); len(left) > 0 {
					t.Errorf("process %v of the first server still runs when the act returned", left)
				}
			}
			gq.release(t)
			gi.release(t)
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
			waitGone(t, append(append(gq.started(), gi.started()...), f.serverPIDs()...))
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
			// The test ID is free again.
			if _, err := f.m.Start(ctx, "t1", qperf, pod); err != nil {
				t.Errorf("Start of t1 again: %v", err)
			}
		})
	}
}
