package lab

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent/netns"
	meshprobe "github.com/meshperf/meshperf/agent/probe"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// icmp6InEchos reads Icmp6InEchos of the namespace at nsPath.
func icmp6InEchos(t *testing.T, nsPath string) int64 {
	t.Helper()
	out, err := runIn(t, 10*time.Second, nsPath, "cat", "/proc/net/snmp6")
	if err != nil {
		t.Fatalf("read /proc/net/snmp6: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Icmp6InEchos" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no Icmp6InEchos in /proc/net/snmp6:\n%s", out)
	return 0
}

// TestProbesDualStack: a real agent on node 1 of a dual-stack lab probes
// node 2 in both families (ip_families IPv4 and IPv6) over host-host and
// pod-pod, ICMP and TCP: every summary is OK with every probe answered,
// each series is there once per family, labelled with it, and the IPv6
// ones reached node 2's IPv6 addresses (its TCP echo responders on them
// and its namespaces' ICMPv6 echo counters saw them).
func TestProbesDualStack(t *testing.T) {
	requireLab(t)
	bin := agentBinary(t)
	l := upLab(t, Config{Prefix: testPrefix(t), Nodes: 2, Mode: ModeHostGW, IPFamily: FamilyDual, Logger: testutil.StreamLogger(t)})
	n1, n2 := l.Nodes[0], l.Nodes[1]
	const port = 17947

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var hostV4, hostV6, pod atomic.Int64
	for _, ln := range []struct {
		ns, addr string
		n        *atomic.Int64
	}{
		{n2.HostNetNSPath, net.JoinHostPort(n2.HostIP.String(), strconv.Itoa(port)), &hostV4},
		{n2.HostNetNSPath, net.JoinHostPort(n2.HostIPv6.String(), strconv.Itoa(port)), &hostV6},
		{n2.PodNetNSPath, net.JoinHostPort("", strconv.Itoa(port)), &pod},
	} {
		l, err := netns.Listen(ln.ns, "tcp", ln.addr)
		if err != nil {
			t.Fatalf("listen %s: %v", ln.addr, err)
		}
		wg.Go(func() {
			if err := meshprobe.ServeEcho(ctx, countingListener{l, ln.n}, meshprobe.EchoConfig{}); err != nil {
				t.Errorf("echo responder %s: %v", ln.addr, err)
			}
		})
	}
	hostEchos0, podEchos0 := icmp6InEchos(t, n2.HostNetNSPath), icmp6InEchos(t, n2.PodNetNSPath)

	fc := startPlanCoordinator(t, &agentv1.ProbePlan{
		Version: 1,
		Settings: &agentv1.ProbeSettings{
			Interval:            durationpb.New(time.Second),
			ReportInterval:      durationpb.New(2 * time.Second),
			Timeout:             durationpb.New(500 * time.Millisecond),
			Kinds:               []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP},
			Paths:               []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD},
			PayloadBytes:        56,
			MaxInFlight:         64,
			MaxPacketsPerSecond: 100,
			IpFamilies:          []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6},
		},
		Upsert: []*agentv1.ProbePeer{{
			NodeName: n2.Name, HostIp: n2.HostIP.String(), PodIp: n2.PodIP.String(),
			HostIpv6: n2.HostIPv6.String(), PodIpv6: n2.PodIPv6.String(), ProbePort: port,
		}},
	})
	ag := startIn(t, n1.HostNetNSPath, bin, "--coordinator", fc.target, "--node", n1.Name,
		"--host-ip", n1.HostIP.String()+","+n1.HostIPv6.String(), "--pod-ip", n1.PodIP.String()+","+n1.PodIPv6.String(),
		"--pod-netns", n1.PodNetNSPath, "--state-dir", t.TempDir(), "--log-level", "info")
	defer func() {
		if t.Failed() {
			ag.stop()
			t.Logf("agent log:\n%s", ag.out)
		}
	}()
	select {
	case ack := <-fc.acks:
		if ack.GetVersion() != 1 || ack.GetError() != "" {
			t.Fatalf("plan ack %v, want version 1 and no error", ack)
		}
	case <-ag.done:
		t.Fatal("agent exited before acknowledging its plan")
	case <-ctx.Done():
		t.Fatal("no plan ack")
	}
	next := func() *agentv1.ProbeReport {
		t.Helper()
		select {
		case r := <-fc.reports:
			return r
		case <-ag.done:
			t.Fatal("agent exited")
		case <-ctx.Done():
			t.Fatal("no probe report in time")
		}
		return nil
	}
	next() // the partial first period
	type key struct {
		path measurev1.Path
		kind measurev1.ProbeKind
		fam  measurev1.IPFamily
	}
	const periods = 3
	for range periods {
		r := next()
		seen := map[key]bool{}
		for _, s := range r.GetSummaries() {
			k := key{s.GetPath(), s.GetKind(), s.GetIpFamily()}
			if seen[k] {
				t.Errorf("report %d: %v twice", r.GetSeq(), k)
			}
			seen[k] = true
			if s.GetNode() != n2.Name || s.GetStatus() != measurev1.Status_STATUS_OK || s.GetSent() == 0 || s.GetReceived() != s.GetSent() {
				t.Errorf("report %d: %v to %s: %v %d/%d %q, want OK and every probe answered",
					r.GetSeq(), k, s.GetNode(), s.GetStatus(), s.GetReceived(), s.GetSent(), s.GetMessage())
			}
		}
		for _, fam := range []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6} {
			for _, pa := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD} {
				for _, kind := range []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP} {
					if !seen[key{pa, kind, fam}] {
						t.Errorf("report %d: no summary of %v %v %v (got %v)", r.GetSeq(), pa, kind, fam, seen)
					}
				}
			}
		}
		if len(r.GetSummaries()) != 8 {
			t.Errorf("report %d: %d summaries, want 8 (2 paths x 2 kinds x 2 families)", r.GetSeq(), len(r.GetSummaries()))
		}
	}
	// The IPv6 probes went to the IPv6 addresses: node 2's IPv6 host
	// listener took TCP probes, and both its namespaces answered ICMPv6
	// echoes (the IPv4 ones do not count there).
	if hostV4.Load() == 0 || hostV6.Load() == 0 || pod.Load() == 0 {
		t.Errorf("TCP probes accepted: host IPv4 %d, host IPv6 %d, pod %d; want some on each", hostV4.Load(), hostV6.Load(), pod.Load())
	}
	if h, p := icmp6InEchos(t, n2.HostNetNSPath)-hostEchos0, icmp6InEchos(t, n2.PodNetNSPath)-podEchos0; h < periods || p < periods {
		t.Errorf("ICMPv6 echoes received: node 2 host %d, pod %d; want at least %d each", h, p, periods)
	}
}
