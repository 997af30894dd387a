package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent/netns"
	meshprobe "github.com/meshperf/meshperf/agent/probe"
	"github.com/meshperf/meshperf/deploy/fleet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	scalePeers    = 1000
	scaleEchoPort = 7201
	scaleInterval = 10 * time.Second
	// scalePeriods is how many whole report periods the measurement
	// window spans.
	scalePeriods = 3
)

// scaleAddr is the i-th of the addresses TestProberScale1000 gives node-1's
// loopback: 10.250.0.1 .. 10.250.3.250, in no other namespace.
func scaleAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 250, byte(i / 250), byte(1 + i%250)})
}

// TestProberScale1000 runs a real agent process (the cmd/agent binary,
// or $MESHPERF_AGENT_BIN) in node-1's host namespace with a probe plan of
// 1,000 peers, all of them addresses of that namespace's loopback (1,000
// extra /32s on lo: the kernel has no dummy devices), ICMP and TCP every
// 10 s; the peers' TCP echo responder is one ServeEcho listener on
// 0.0.0.0 in the namespace, served by this test process, and the plan
// comes from a minimal coordinator in this process on a unix socket (it
// registers the agent, sends the plan, acknowledges the reports). Over
// three whole report periods it logs the agent's own figures from
// /proc/PID: RSS (VmRSS at the end, VmHWM peak) and CPU (utime+stime
// ticks over the window) as
//
//	prober peers=1000 rss_mb=.. rss_peak_mb=.. cpu_pct=..
//
// (`make bench-prober`). The target is under 50 MB of RSS and 5 % of one
// core; it is logged, not asserted (the machine is shared). Asserted:
// every probe of the window is answered, none skipped.
func TestProberScale1000(t *testing.T) {
	requireLab(t)
	bin := agentBinary(t)
	l := upLab(t, Config{Prefix: testPrefix(t), Nodes: 2, Mode: ModeHostGW, Logger: testutil.StreamLogger(t)})
	n1 := l.Nodes[0]
	checkLabNS(t, n1.HostNetNSPath)

	var batch strings.Builder
	batch.WriteString("link set lo up\n")
	for i := range scalePeers {
		fmt.Fprintf(&batch, "addr add %s/32 dev lo\n", scaleAddr(i))
	}
	file := filepath.Join(t.TempDir(), "addrs")
	if err := os.WriteFile(file, []byte(batch.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runIn(t, 60*time.Second, n1.HostNetNSPath, "ip", "-batch", file); err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // the echo responder ends with ctx
	ln, err := netns.Listen(n1.HostNetNSPath, "tcp", "0.0.0.0:"+strconv.Itoa(scaleEchoPort))
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		// One responder stands for every peer, all probed from node-1's
		// host IP: the per-source bound of a real node's responder would
		// reset what a fleet's distinct sources spread.
		if err := meshprobe.ServeEcho(ctx, ln, meshprobe.EchoConfig{PerSource: meshprobe.EchoConcurrency}); err != nil {
			t.Errorf("echo responder: %v", err)
		}
	})

	peers := make([]*agentv1.ProbePeer, scalePeers)
	for i := range peers {
		peers[i] = &agentv1.ProbePeer{NodeName: fmt.Sprintf("peer-%d", i), HostIp: scaleAddr(i).String(), ProbePort: scaleEchoPort}
	}
	fc := startPlanCoordinator(t, &agentv1.ProbePlan{
		Version: 1,
		Settings: &agentv1.ProbeSettings{
			Interval:            durationpb.New(scaleInterval),
			ReportInterval:      durationpb.New(scaleInterval),
			Timeout:             durationpb.New(2 * time.Second),
			Kinds:               []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP},
			Paths:               []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
			PayloadBytes:        56,
			MaxInFlight:         256,
			MaxPacketsPerSecond: 1000,
		},
		Upsert: peers,
	})
	ag := startIn(t, n1.HostNetNSPath, bin, "--coordinator", fc.target, "--node", n1.Name,
		"--host-ip", n1.HostIP.String(), "--state-dir", t.TempDir(), "--log-level", "info")
	defer func() {
		if t.Failed() {
			ag.stop()
			t.Logf("agent log:\n%s", ag.out)
		}
	}()
	pid := ag.cmd.Process.Pid // nsenter execs the agent: same process

	select {
	case ack := <-fc.acks:
		if ack.GetVersion() != 1 || ack.GetError() != "" {
			t.Fatalf("plan ack %v, want version 1 and no error", ack)
		}
	case <-ag.done:
		t.Fatalf("agent exited before acknowledging its plan")
	case <-ctx.Done():
		t.Fatal("no plan ack")
	}
	// The first report ends the partial first period: probing runs from
	// here on, and the window is the next whole periods.
	next := func() *agentv1.ProbeReport {
		t.Helper()
		select {
		case r := <-fc.reports:
			return r
		case <-ag.done:
			t.Fatalf("agent exited")
		case <-ctx.Done():
			t.Fatal("no probe report in time")
		}
		return nil
	}
	next()
	cpu0, start := cpuSeconds(t, pid), time.Now()
	reps := make([]*agentv1.ProbeReport, scalePeriods)
	for i := range reps {
		reps[i] = next()
	}
	cpu1, wall := cpuSeconds(t, pid), time.Since(start)
	rss, hwm, err := fleet.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpu1 - cpu0

	var sent, received, skipped uint64
	lost := map[measurev1.ProbeKind]int{}
	for _, r := range reps {
		skipped += r.GetSkipped()
		for _, s := range r.GetSummaries() {
			sent += uint64(s.GetSent())
			received += uint64(s.GetReceived())
			if s.GetStatus() != measurev1.Status_STATUS_OK || s.GetReceived() != s.GetSent() {
				lost[s.GetKind()]++
				if lost[s.GetKind()] <= 3 {
					t.Logf("%s %v: %v %s", s.GetNode(), s.GetKind(), s.GetStatus(), s.GetMessage())
				}
			}
		}
		if n := len(r.GetSummaries()); n != 2*scalePeers {
			t.Errorf("report %d has %d summaries, want %d (every peer, ICMP and TCP)", r.GetSeq(), n, 2*scalePeers)
		}
	}
	t.Logf("agent pid %d, %d peers x ICMP+TCP every %v, window %v: %d reports, %d probes sent, %d answered, %d skipped",
		pid, scalePeers, scaleInterval, wall.Round(time.Millisecond), len(reps), sent, received, skipped)
	t.Logf("prober peers=%d rss_mb=%.1f rss_peak_mb=%.1f cpu_pct=%.2f (the agent process alone, from /proc/%d; target < 50 MB and < 5 %%)",
		scalePeers, rss, hwm, 100*cpu/wall.Seconds(), pid)
	if want := uint64(scalePeriods * 2 * scalePeers); sent != want {
		t.Errorf("%d probes reported in %d periods, want %d", sent, scalePeriods, want)
	}
	if received != sent || skipped > 0 || len(lost) > 0 {
		t.Errorf("%d of %d probes answered, %d skipped (series not OK per kind: %v), want all", received, sent, skipped, lost)
	}
}

// agentBinary returns $MESHPERF_AGENT_BIN, or builds cmd/agent into a
// temporary directory.
func agentBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("MESHPERF_AGENT_BIN"); b != "" {
		return b
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "github.com/meshperf/meshperf/cmd/agent").CombinedOutput()
	if err != nil {
		t.Fatalf("build cmd/agent: %v\n%s", err, out)
	}
	return filepath.Join(dir, "agent")
}

// planCoordinator is the least of a coordinator an agent needs to probe:
// it answers a Register with Registered (the coordinator's default 1 s
// heartbeats), sends plan, heartbeats every second, forwards the agent's
// plan acks and reports (acknowledging each report).
type planCoordinator struct {
	agentv1.UnimplementedAgentServiceServer
	plan    *agentv1.ProbePlan
	target  string // the agent's --coordinator
	acks    chan *agentv1.PlanAck
	reports chan *agentv1.ProbeReport
}

// startPlanCoordinator serves a planCoordinator on a unix socket until the
// test ends.
func startPlanCoordinator(t *testing.T, plan *agentv1.ProbePlan) *planCoordinator {
	t.Helper()
	c := &planCoordinator{plan: plan, acks: make(chan *agentv1.PlanAck, 16), reports: make(chan *agentv1.ProbeReport, 64)}
	c.target, _ = testutil.ServeGRPC(t, "unix", func(g *grpc.Server) { agentv1.RegisterAgentServiceServer(g, c) })
	return c
}

// Connect runs one agent session.
func (c *planCoordinator) Connect(s grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	if first.GetRegister() == nil {
		return errors.New("first message is not a Register")
	}
	out := make(chan *agentv1.ConnectResponse, 64)
	out <- &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
		HeartbeatInterval: durationpb.New(time.Second), HeartbeatTimeout: durationpb.New(10 * time.Second)}}}
	out <- &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ProbePlan{ProbePlan: c.plan}}
	ctx, cancel := context.WithCancel(s.Context())
	defer cancel()
	sendErr := make(chan error, 1)
	go func() { // owner: Connect; ends with ctx
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var m *agentv1.ConnectResponse
			select {
			case m = <-out:
			case <-tick.C:
				m = &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}}
			case <-ctx.Done():
				sendErr <- nil
				return
			}
			if err := s.Send(m); err != nil {
				sendErr <- err
				return
			}
		}
	}()
	for {
		m, err := s.Recv()
		if err != nil {
			cancel()
			return errors.Join(err, <-sendErr)
		}
		switch {
		case m.GetPlanAck() != nil:
			c.acks <- m.GetPlanAck()
		case m.GetProbeReport() != nil:
			r := m.GetProbeReport()
			select {
			case c.reports <- r:
			default: // the test stopped reading
			}
			select {
			case out <- &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ReportAck{ReportAck: &agentv1.ReportAck{Seqs: []uint64{r.GetSeq()}}}}:
			case <-ctx.Done():
			}
		}
	}
}

// cpuSeconds is fleet.CPUSeconds, failing t on an error.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	s, err := fleet.CPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
