package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// loopbackPeers returns n peers with host_ip 127.0.1.1, 127.0.1.2, ...
// (answered by the kernel for ICMP) and, with tcp, a probe port served by
// one ServeEcho listener on 127.0.0.1, their service_ip (their host_ip has
// no listener: TCP there is refused).
func loopbackPeers(t testing.TB, n int, tcp bool) []*agentv1.ProbePeer {
	t.Helper()
	var port uint32
	if tcp {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = uint32(serveEcho(t, ln, EchoConfig{}).Port())
	}
	peers := make([]*agentv1.ProbePeer, n)
	for i := range n {
		peers[i] = &agentv1.ProbePeer{
			NodeName:     fmt.Sprintf("peer-%d", i),
			HostIp:       fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250),
			ServiceIp:    "127.0.0.1", // TCP to the shared echo listener
			ProbePort:    port,
			HostMtuBytes: 9000,
		}
	}
	return peers
}

type reports struct {
	mu  sync.Mutex
	got []*agentv1.ProbeReport
}

func (r *reports) add(rep *agentv1.ProbeReport) {
	r.mu.Lock()
	r.got = append(r.got, rep)
	r.mu.Unlock()
}
func (r *reports) all() []*agentv1.ProbeReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*agentv1.ProbeReport(nil), r.got...)
}

// runProber runs p for d (bounded), then stops it and waits.
func runProber(t testing.TB, p *Prober, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func loopbackProber(t testing.TB, r *reports) *Prober {
	t.Helper()
	p, err := New(Config{
		Node:          "self",
		Host:          Network{Net: measurev1.Network_NETWORK_HOST, IP: netip.MustParseAddr("127.0.0.1"), MTU: 65536},
		Report:        func(rep *agentv1.ProbeReport) { r.add(rep) },
		AllowLoopback: true,
		Logger:        discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunLoopback: a plan of loopback peers is probed, ICMP, ICMP_MTU and
// TCP, and reported per period with every probe answered; a refused TCP
// port is reported refused.
func TestRunLoopback(t *testing.T) {
	rawOK(t)
	var r reports
	p := loopbackProber(t, &r)
	peers := loopbackPeers(t, 3, true)
	refused := &agentv1.ProbePeer{NodeName: "refuser", HostIp: "127.0.0.1", ServiceIp: "127.0.0.1", ProbePort: uint32(closedPort(t))}
	s := testSettings()
	s.ReportInterval = durationpb.New(time.Second)
	s.Kinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, measurev1.ProbeKind_PROBE_KIND_TCP}
	s.Paths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_HOST_TO_SERVICE, measurev1.Path_PATH_POD_TO_POD}
	if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Settings: s, Upsert: append(peers, refused)}); err != nil {
		t.Fatal(err)
	}
	runProber(t, p, 3500*time.Millisecond)
	got := r.all()
	if len(got) < 2 {
		t.Fatalf("%d reports in 3.5 s of 1 s periods, want at least 2", len(got))
	}
	type k struct {
		node string
		path measurev1.Path
		kind measurev1.ProbeKind
	}
	seen := map[k]*agentv1.ProbeSummary{}
	for i, rep := range got {
		if rep.PlanVersion != 1 || rep.Seq != uint64(i+1) {
			t.Errorf("report %d: plan %d seq %d", i, rep.PlanVersion, rep.Seq)
		}
		for _, sm := range rep.Summaries {
			seen[k{sm.GetNode(), sm.Path, sm.Kind}] = sm
		}
	}
	for _, pe := range peers {
		for _, want := range []k{
			{pe.NodeName, measurev1.Path_PATH_HOST_TO_HOST, measurev1.ProbeKind_PROBE_KIND_ICMP},
			{pe.NodeName, measurev1.Path_PATH_HOST_TO_HOST, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU},
			{pe.NodeName, measurev1.Path_PATH_HOST_TO_HOST, measurev1.ProbeKind_PROBE_KIND_TCP},
			{pe.NodeName, measurev1.Path_PATH_HOST_TO_SERVICE, measurev1.ProbeKind_PROBE_KIND_TCP},
		} {
			sm := seen[want]
			if sm == nil {
				t.Errorf("no summary of %v", want)
				continue
			}
			if want.kind == measurev1.ProbeKind_PROBE_KIND_TCP && want.path == measurev1.Path_PATH_HOST_TO_HOST {
				// host_ip 127.0.x.y has no listener on the echo port.
				if sm.Status != measurev1.Status_STATUS_REFUSED {
					t.Errorf("%v: %v, want refused", want, sm)
				}
				continue
			}
			if sm.Status != measurev1.Status_STATUS_OK || sm.Received != sm.Sent || sm.Sent == 0 || sm.RttMinSeconds <= 0 || sm.RttMinSeconds > sm.RttMedianSeconds+1e-12 && sm.Received > 0 {
				t.Errorf("%v: %v", want, sm)
			}
		}
	}
	for key := range seen {
		if key.path == measurev1.Path_PATH_POD_TO_POD || key.path == measurev1.Path_PATH_HOST_TO_SERVICE && key.kind != measurev1.ProbeKind_PROBE_KIND_TCP {
			t.Errorf("probed %v: no pod network / ICMP to a service", key)
		}
	}
	if sm := seen[k{"refuser", measurev1.Path_PATH_HOST_TO_SERVICE, measurev1.ProbeKind_PROBE_KIND_TCP}]; sm == nil || sm.Status != measurev1.Status_STATUS_REFUSED || sm.Received != 0 {
		t.Errorf("refused port: %v", sm)
	}
}

// TestRunBudget: with max_packets_per_second 1 (burst 1) and
// max_in_flight 1, most of 40 probes per second are skipped and counted.
func TestRunBudget(t *testing.T) {
	rawOK(t)
	var r reports
	p := loopbackProber(t, &r)
	s := testSettings()
	s.ReportInterval = durationpb.New(time.Second)
	s.Kinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP}
	s.MaxPacketsPerSecond = 1
	s.MaxInFlight = 1
	if _, err := p.Apply(&agentv1.ProbePlan{Version: 3, Settings: s, Upsert: loopbackPeers(t, 40, false)}); err != nil {
		t.Fatal(err)
	}
	runProber(t, p, 2500*time.Millisecond)
	var sent, skipped uint64
	for _, rep := range r.all() {
		skipped += rep.Skipped
		for _, sm := range rep.Summaries {
			sent += uint64(sm.Sent)
		}
	}
	if skipped == 0 || sent > 4 || sent+skipped < 40 {
		t.Errorf("sent %d, skipped %d over about 2 s of 40 probes/s at 1 probe/s", sent, skipped)
	}
}

// TestRunSubset: with subset_size 2 only two of 10 peers are probed in an
// epoch.
func TestRunSubset(t *testing.T) {
	rawOK(t)
	var r reports
	p := loopbackProber(t, &r)
	s := testSettings()
	s.ReportInterval = durationpb.New(time.Second)
	s.Kinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP}
	s.SubsetSize = 2
	s.SubsetRotation = durationpb.New(time.Hour)
	if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Settings: s, Upsert: loopbackPeers(t, 10, false)}); err != nil {
		t.Fatal(err)
	}
	runProber(t, p, 2200*time.Millisecond)
	nodes := map[string]bool{}
	for _, rep := range r.all() {
		for _, sm := range rep.Summaries {
			nodes[sm.GetNode()] = true
		}
	}
	// An hourly epoch boundary may fall in the run: at most 4 then.
	if len(nodes) == 0 || len(nodes) > 4 {
		t.Errorf("probed %d peers with subset_size 2: %v", len(nodes), nodes)
	}
}

// TestRunTwice: a second concurrent Run is refused.
func TestRunTwice(t *testing.T) {
	var r reports
	p := loopbackProber(t, &r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := p.Run(ctx); err == nil {
		t.Error("a second Run was not refused")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestPhases: phases are within the interval, stable, and spread (no
// two agents in step: another node's phases differ).
func TestPhases(t *testing.T) {
	k := seriesKey{"peer-1", measurev1.Path_PATH_HOST_TO_HOST, measurev1.ProbeKind_PROBE_KIND_ICMP, 0}
	if phase("a", k, 10*time.Second) != phase("a", k, 10*time.Second) { //nolint:staticcheck // SA4000: two calls on purpose, to check that phase is stable
		t.Error("phase not stable")
	}
	if phase("a", k, 10*time.Second) == phase("b", k, 10*time.Second) {
		t.Error("two agents share a phase")
	}
	buckets := make([]int, 10)
	for i := range 1000 {
		ph := phase("a", seriesKey{fmt.Sprintf("peer-%d", i), k.path, k.kind, 0}, 10*time.Second)
		if ph < 0 || ph >= 10*time.Second {
			t.Fatalf("phase %v", ph)
		}
		buckets[ph/time.Second]++
	}
	for i, n := range buckets {
		if n < 60 || n > 140 {
			t.Errorf("second %d holds %d of 1000 probes: %v", i, n, buckets)
		}
	}
}

// TestRunEarlyEnd: a failure in a series that had none ends the 10 s
// period at the end of its 1 s probe interval.
func TestRunEarlyEnd(t *testing.T) {
	var r reports
	p := loopbackProber(t, &r)
	s := testSettings()
	s.ReportInterval = durationpb.New(10 * time.Second)
	s.Kinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_TCP}
	s.Paths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_SERVICE}
	refused := &agentv1.ProbePeer{NodeName: "refuser", HostIp: "127.0.0.1", ServiceIp: "127.0.0.1", ProbePort: uint32(closedPort(t))}
	if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Settings: s, Upsert: []*agentv1.ProbePeer{refused}}); err != nil {
		t.Fatal(err)
	}
	runProber(t, p, 2500*time.Millisecond)
	got := r.all()
	if len(got) == 0 {
		t.Fatal("no report within 2.5 s of a new failure")
	}
	rep := got[0]
	if d := rep.Period.AsDuration(); d <= 0 || d > 2*time.Second {
		t.Errorf("early period of %v, want at most 2 s", d)
	}
	if len(rep.Summaries) != 1 || rep.Summaries[0].Status != measurev1.Status_STATUS_REFUSED {
		t.Errorf("early report: %v", rep)
	}
}
