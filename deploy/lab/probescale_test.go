package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent/netns"
	meshprobe "github.com/meshperf/meshperf/agent/probe"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	scalePeers    = 1000
	scaleEchoPort = 7201
	scaleInterval = 10 * time.Second
	scaleRun      = 30 * time.Second
)

// scaleAddr is the i-th of the addresses TestProberScale1000 gives node-1's
// loopback: 10.250.0.1 .. 10.250.3.250, in no other namespace.
func scaleAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 250, byte(i / 250), byte(1 + i%250)})
}

// TestProberScale1000 runs one prober in node-1's namespace against 1,000
// peers, all of them addresses of that namespace's loopback (1,000 extra
// /32s on lo: the kernel has no dummy devices), ICMP and TCP (to one
// ServeEcho listener on 0.0.0.0 in the namespace) every 10 s for 30 s, and
// logs the process's RSS growth and CPU share over the run (getrusage of
// the whole test process: prober, echo responder and runtime). The target
// is under 50 MB of RSS and 5 % of one core; it is logged, not asserted
// (the machine is shared). Asserted: every probe is answered.
func TestProberScale1000(t *testing.T) {
	requireLab(t)
	l := upLab(t, Config{Prefix: testPrefix(t), Nodes: 2, Mode: ModeHostGW, Logger: testLogger(t)})
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

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // the echo responder ends with ctx
	ln, err := netns.Listen(n1.HostNetNSPath, "tcp", "0.0.0.0:"+strconv.Itoa(scaleEchoPort))
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := meshprobe.ServeEcho(ctx, ln); err != nil {
			t.Errorf("echo responder: %v", err)
		}
	})

	var mu sync.Mutex
	var reps []*agentv1.ProbeReport
	p, err := meshprobe.New(meshprobe.Config{
		Node:   n1.Name,
		Host:   meshprobe.Network{Net: measurev1.Network_NETWORK_HOST, NetNS: n1.HostNetNSPath},
		Report: func(r *agentv1.ProbeReport) { mu.Lock(); reps = append(reps, r); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	peers := make([]*agentv1.ProbePeer, scalePeers)
	for i := range peers {
		peers[i] = &agentv1.ProbePeer{NodeName: fmt.Sprintf("peer-%d", i), HostIp: scaleAddr(i).String(), ProbePort: scaleEchoPort}
	}
	if _, err := p.Apply(&agentv1.ProbePlan{
		Version: 1,
		Settings: &agentv1.ProbeSettings{
			Interval:            durationpb.New(scaleInterval),
			ReportInterval:      durationpb.New(scaleInterval),
			Timeout:             durationpb.New(2 * time.Second),
			Kinds:               []agentv1.ProbeKind{agentv1.ProbeKind_PROBE_KIND_ICMP, agentv1.ProbeKind_PROBE_KIND_TCP},
			Paths:               []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
			PayloadBytes:        56,
			MaxInFlight:         256,
			MaxPacketsPerSecond: 1000,
		},
		Upsert: peers,
	}); err != nil {
		t.Fatal(err)
	}

	rss0, _ := procStatusKB(t, "VmRSS")
	var ru0, ru1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, scaleRun+time.Second) // +1 s: the third period's report
	if err := p.Run(runCtx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	stop()
	wall := time.Since(start)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru1); err != nil {
		t.Fatal(err)
	}
	rss1, _ := procStatusKB(t, "VmRSS")
	hwm, _ := procStatusKB(t, "VmHWM")
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime)-syscall.TimevalToNsec(ru0.Utime)) +
		time.Duration(syscall.TimevalToNsec(ru1.Stime)-syscall.TimevalToNsec(ru0.Stime))

	mu.Lock()
	defer mu.Unlock()
	var sent, received, skipped uint64
	lost := map[agentv1.ProbeKind]int{}
	for _, r := range reps {
		skipped += r.Skipped
		for _, s := range r.Summaries {
			sent += uint64(s.Sent)
			received += uint64(s.Received)
			if s.Status != measurev1.Status_STATUS_OK {
				lost[s.Kind]++
				if lost[s.Kind] <= 3 {
					t.Logf("%s %v: %v %s", s.GetNode(), s.Kind, s.Status, s.Message)
				}
			}
		}
	}
	t.Logf("%d peers x ICMP+TCP every %v for %v: %d reports, %d probes sent, %d answered, %d skipped",
		scalePeers, scaleInterval, wall.Round(time.Millisecond), len(reps), sent, received, skipped)
	t.Logf("RSS %.1f MB -> %.1f MB (growth %+.1f MB, peak VmHWM %.1f MB; target < 50 MB)",
		float64(rss0)/1024, float64(rss1)/1024, float64(rss1-rss0)/1024, float64(hwm)/1024)
	t.Logf("CPU %v user+system in %v: %.2f %% of one core (whole test process: prober, echo responder, runtime; target < 5 %%)",
		cpu.Round(time.Millisecond), wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds())
	// Periods are aligned to the wall clock, so the first is partial and
	// the last may end after Run: at least two intervals' worth must be in
	// the reports.
	if want := uint64(2 * 2 * scalePeers); sent < want {
		t.Errorf("%d probes reported in %v, want at least %d", sent, scaleRun, want)
	}
	if received < sent*99/100 || len(lost) > 0 {
		t.Errorf("%d of %d probes answered (series not OK per kind: %v), want all", received, sent, lost)
	}
}

// procStatusKB returns the kB figure of a /proc/self/status field (VmRSS,
// VmHWM).
func procStatusKB(t *testing.T, field string) (int64, error) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return kb, nil
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0, nil
}
