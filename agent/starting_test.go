package agent_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// serverGate holds qperf servers in their start: a stand-in first in PATH
// records its PID and, for a server (-lp), waits until the test opens the
// gate, then execs the real qperf (same PID, same process group). Other
// runs (the agent's version probe) go straight through.
type serverGate struct{ dir, open string }

func newServerGate(t *testing.T) *serverGate {
	t.Helper()
	toolPath, err := exec.LookPath("qperf")
	if err != nil {
		t.Skip("qperf is not installed")
	}
	dir := t.TempDir()
	g := &serverGate{dir: dir, open: filepath.Join(dir, "open")}
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = -lp ]; then\n  : > '%s/started.'$$\n  while [ ! -e '%s' ]; do sleep 0.01; done\nfi\nexec '%s' \"$@\"\n",
		dir, g.open, toolPath)
	if err := os.WriteFile(filepath.Join(dir, "qperf"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Cleanup(func() { _ = os.WriteFile(g.open, nil, 0o644) }) // never leave a stand-in waiting
	return g
}

// started returns the PIDs of the held servers that began.
func (g *serverGate) started() []int {
	files, _ := filepath.Glob(filepath.Join(g.dir, "started.*"))
	var pids []int
	for _, f := range files {
		if pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Ext(f), ".")); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (g *serverGate) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(g.open, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOrdersWhileStarting: an order for a test whose server is still
// starting is not lost. A StartServer with the same test ID (on the other
// network) is refused; a StopServer cancels the start, answers once
// nothing runs, and the StartServer answers CANCELED. Either way the act
// answers while the first server is still held in its start.
func TestOrdersWhileStarting(t *testing.T) {
	testnet.Need(t, "qperf")
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	stop := &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}
	tests := []struct {
		name string
		act  *agentv1.ConnectResponse // sent while the server of "s1" on the host network starts
		// The answers: the act's, and the first start's.
		wantAct, wantStart     measurev1.Status
		wantActIn, wantStartIn string
	}{
		{"StartServer on the pod network", work("s1", 20*time.Second, startServer(measurev1.Tool_TOOL_QPERF, pod)),
			measurev1.Status_STATUS_SERVER_ERROR, measurev1.Status_STATUS_OK, `"s1" already has a server`, ""},
		{"StartServer on the host network", work("s1", 20*time.Second, startServer(measurev1.Tool_TOOL_QPERF, host)),
			measurev1.Status_STATUS_SERVER_ERROR, measurev1.Status_STATUS_OK, `"s1" already has a server`, ""},
		{"StopServer", work("s1", 20*time.Second, stop),
			measurev1.Status_STATUS_OK, measurev1.Status_STATUS_CANCELED, "", "stopped while starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testnet.NewNetNS(t, "mp-agent") // deleted after the agent stopped: cleanups run last-in first-out
			g := newServerGate(t)
			target, next := sessions(t)
			cfg := baseConfig(t, target, "node-a")
			cfg.PodIP, cfg.PodNetNS = netip.MustParseAddr("127.0.0.50"), path
			startAgent(t, cfg)
			defer noServersLeft(t, cfg.Ports.Qperf)
			fs := next()
			fs.accept(t, time.Minute, 2*time.Minute) // no heartbeat in the way

			fs.send(t, work("s1", 20*time.Second, startServer(measurev1.Tool_TOOL_QPERF, host)))
			if !poll(30*time.Second, func() bool { return len(g.started()) == 1 }) {
				t.Fatal("the first server never began")
			}
			fs.send(t, tt.act)
			// The act answers while the first server is held, or (wrongly)
			// starts a server of its own, or waits.
			poll(30*time.Second, func() bool { return len(fs.msgs) > 0 || len(g.started()) > 1 })
			answeredFirst := len(fs.msgs) > 0
			g.release(t)
			var started []*agentv1.WorkResult
			var stopped *agentv1.WorkResult
			for range 2 {
				if r := fs.result(t, "s1"); outcomeKind(r) == "server_stopped" {
					stopped = r
				} else {
					started = append(started, r)
				}
			}
			var act, first *agentv1.WorkResult
			switch {
			case stopped != nil && len(started) == 1:
				act, first = stopped, started[0]
			case len(started) == 2: // the first start is the one not refused as a duplicate
				act, first = started[0], started[1]
				if strings.Contains(first.GetMessage(), "already has a server") {
					act, first = first, act
				}
			default:
				t.Fatalf("answers %v and %v, want one to the act and one to the first start", started, stopped)
			}
			if act.GetStatus() != tt.wantAct || !strings.Contains(act.GetMessage(), tt.wantActIn) {
				t.Errorf("act: %v %q, want %v with %q", act.GetStatus(), act.GetMessage(), tt.wantAct, tt.wantActIn)
			}
			if first.GetStatus() != tt.wantStart || !strings.Contains(first.GetMessage(), tt.wantStartIn) {
				t.Errorf("first start: %v %q, want %v with %q", first.GetStatus(), first.GetMessage(), tt.wantStart, tt.wantStartIn)
			}
			if !answeredFirst {
				t.Error("the act did not answer while the first server was starting")
			}
			if tt.wantStart == measurev1.Status_STATUS_OK {
				if pids := serverPIDs(cfg.Ports.Qperf); len(pids) != 1 {
					t.Errorf("server processes %v, want the first one only", pids)
				}
				fs.send(t, work("s1", 20*time.Second, stop))
				if r := fs.result(t, "s1"); r.GetStatus() != measurev1.Status_STATUS_OK {
					t.Errorf("stop: %v %q", r.GetStatus(), r.GetMessage())
				}
			}
			// StopServer answered OK: nothing of s1 runs, on any network.
			noServersLeft(t, cfg.Ports.Qperf)
		})
	}
}
