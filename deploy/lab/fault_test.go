package lab

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil"
)

func TestFaultCheck(t *testing.T) {
	l, err := Describe(Config{Prefix: "x", Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		f       Fault
		wantErr string // "" for success
		want    Fault  // with defaults, on success
	}{
		{"mtu default", Fault{Kind: FaultMTUBlackhole, Node: "node-2"}, "", Fault{Kind: FaultMTUBlackhole, Node: "node-2", MTUBytes: 1400}},
		{"rate default", Fault{Kind: FaultRateLimit, Node: "node-3"}, "", Fault{Kind: FaultRateLimit, Node: "node-3", RateBPS: 100_000_000}},
		{"pod-drop ignores parameters", Fault{Kind: FaultPodDrop, Node: "node-1", MTUBytes: 5}, "", Fault{Kind: FaultPodDrop, Node: "node-1", MTUBytes: 5}},
		{"unknown kind", Fault{Kind: "latency", Node: "node-1"}, `Kind "latency"`, Fault{}},
		{"unknown node", Fault{Kind: FaultICMPDrop, Node: "node-4"}, `Node "node-4"`, Fault{}},
		{"empty node", Fault{Kind: FaultICMPDrop}, `Node ""`, Fault{}},
		{"mtu too small", Fault{Kind: FaultMTUBlackhole, Node: "node-1", MTUBytes: 100}, "MTUBytes 100", Fault{}},
		{"mtu too large", Fault{Kind: FaultMTUBlackhole, Node: "node-1", MTUBytes: 9001}, "MTUBytes 9001", Fault{}},
		{"rate too low", Fault{Kind: FaultRateLimit, Node: "node-1", RateBPS: 999_999}, "RateBPS 999999", Fault{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f
			_, err := f.check(l)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrFault) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("check(%+v) = %v, want ErrFault naming %q", tt.f, err, tt.wantErr)
				}
				return
			}
			if err != nil || f != tt.want {
				t.Fatalf("check(%+v) = %+v, %v; want %+v", tt.f, f, err, tt.want)
			}
		})
	}
}

func TestParseTBFRate(t *testing.T) {
	tests := []struct {
		out  string
		want uint64
		ok   bool
	}{
		{"qdisc tbf 8003: root refcnt 2 rate 100Mbit burst 64Kb lat 50ms \n", 100_000_000, true},
		{"qdisc tbf 1: root refcnt 2 rate 2Gbit burst 64Kb lat 50ms", 2_000_000_000, true},
		{"qdisc tbf 1: root refcnt 2 rate 1500Kbit burst 64Kb lat 50ms", 1_500_000, true},
		{"qdisc tbf 1: root refcnt 2 rate 12345bit burst 64Kb lat 50ms", 12345, true},
		{"qdisc noqueue 0: root refcnt 2", 0, false},
		{"", 0, false},
		{"qdisc tbf 1: root rate", 0, false},
		{"qdisc tbf 1: root rate fastbit burst", 0, false},
		{"qdisc tbf 1: root rate -5Mbit burst", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseTBFRate(tt.out)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseTBFRate(%q) = %d, %v; want %d, %v", tt.out, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFaultRules(t *testing.T) {
	for _, mode := range Modes {
		l, err := Describe(Config{Prefix: "x", Nodes: 3, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		f := Fault{Kind: FaultMTUBlackhole, Node: "node-2", MTUBytes: 1300}
		rules := faultRules(l, l.Nodes[1], f)
		for _, want := range []string{
			":MESHLAB-MTU - [0:0]",
			"-I FORWARD -j MESHLAB-MTU",
			"-A MESHLAB-MTU -s 10.244.2.0/24 -d 10.244.1.0/24 -m length --length 1301:65535 -j DROP",
			"-A MESHLAB-MTU -s 10.244.3.0/24 -d 10.244.2.0/24 -m length --length 1301:65535 -j DROP",
		} {
			if !strings.Contains(rules, want+"\n") {
				t.Errorf("%s: rules lack %q:\n%s", mode, want, rules)
			}
		}
		if strings.Contains(rules, "-d 10.244.2.0/24 -s 10.244.2.0/24") || strings.Contains(rules, "-s 10.244.2.0/24 -d 10.244.2.0/24") {
			t.Errorf("%s: rules touch same-node pod traffic:\n%s", mode, rules)
		}
		if got := strings.Contains(rules, "-s 10.244.1.0/32 -j RETURN"); got != (mode == ModeVXLAN) {
			t.Errorf("%s: VTEP exemption present = %v:\n%s", mode, got, rules)
		}
		if got := parseLengthMatch("*filter\n"+rules, "MESHLAB-MTU"); got != 1300 {
			t.Errorf("%s: parseLengthMatch = %d, want 1300", mode, got)
		}
	}
}

// faultProbe is a probe with the fault on node-2 and what it should do.
type faultProbe struct {
	probe
	// wantOK: the probe works with the fault in place.
	wantOK bool
}

func TestFaults(t *testing.T) {
	requireLab(t)
	testskip.Tools(t, "iproute2", "tc")
	t.Parallel()
	ok := func(Config) bool { return true }
	p := func(name string, from func(*Lab) string, client []string, target func(*Lab) string, wantOK bool) faultProbe {
		return faultProbe{probe{name: name, from: from, client: client, target: target, wantOK: ok}, wantOK}
	}
	tcp := func(name string, from func(*Lab) string, target func(*Lab) string, serverNS func(*Lab) string, wantOK bool) faultProbe {
		return faultProbe{probe{name: name, from: from, client: qperfLat, target: target, serverNS: serverNS, server: qperfSrv, listen: "t", wantOK: ok}, wantOK}
	}
	faults := []struct {
		fault  Fault
		modes  []Mode
		probes []faultProbe
	}{
		{Fault{Kind: FaultPodDrop, Node: "node-2"}, Modes, []faultProbe{
			p("pod1 to pod2 ping", pod(1), ping, podIP(2), false),
			p("pod3 to pod2 ping", pod(3), ping, podIP(2), false),
			p("pod1 to pod3 ping", pod(1), ping, podIP(3), true),
			p("host1 to host2 ping", host(1), ping, hostIP(2), true),
			p("host1 to pod2 ping", host(1), ping, podIP(2), true),
			p("pod2 to host1 ping", pod(2), ping, hostIP(1), true),
			p("pod2 to external ping", pod(2), ping, externalIP, true),
			tcp("pod1 to service2 TCP", pod(1), serviceIP(2), pod(2), false),
			tcp("host3 to service2 TCP", host(3), serviceIP(2), pod(2), true),
		}},
		{Fault{Kind: FaultMTUBlackhole, Node: "node-2"}, Modes, []faultProbe{
			p("pod1 to pod2 ping", pod(1), ping, podIP(2), true),
			p("pod1 to pod2 DF 1400", pod(1), pingDF(1372), podIP(2), true),
			p("pod1 to pod2 DF 1401", pod(1), pingDF(1373), podIP(2), false),
			p("pod2 to pod3 DF 1450", pod(2), pingDF(1422), podIP(3), false),
			p("pod1 to pod3 DF 1450", pod(1), pingDF(1422), podIP(3), true),
			p("host1 to host2 DF 1500", host(1), pingDF(1472), hostIP(2), true),
			tcp("pod1 to service2 TCP latency", pod(1), serviceIP(2), pod(2), true),
		}},
		{Fault{Kind: FaultICMPDrop, Node: "node-2"}, []Mode{ModeHostGW}, []faultProbe{
			p("host1 to host2 ping", host(1), ping, hostIP(2), false),
			p("host2 to host3 ping", host(2), ping, hostIP(3), false),
			p("pod1 to pod2 ping", pod(1), ping, podIP(2), false),
			p("host1 to host3 ping", host(1), ping, hostIP(3), true),
			p("host2 to external ping", host(2), ping, externalIP, false),
			p("pod2 to external ping", pod(2), ping, externalIP, false),
			p("pod1 to external ping", pod(1), ping, externalIP, true),
			tcp("host1 to service2 TCP", host(1), serviceIP(2), pod(2), true),
			tcp("pod2 to external TCP", pod(2), externalIP, external, true),
		}},
		{Fault{Kind: FaultRateLimit, Node: "node-2", RateBPS: 50_000_000}, []Mode{ModeHostGW}, []faultProbe{
			p("host1 to host2 ping", host(1), ping, hostIP(2), true),
			tcp("pod1 to service2 TCP", pod(1), serviceIP(2), pod(2), true),
		}},
	}
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			l := upLab(t, Config{Prefix: testPrefix(t), Nodes: 3, Mode: mode, Logger: testutil.StreamLogger(t)})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			port := 16000
			for _, fc := range faults {
				if !slices.Contains(fc.modes, mode) {
					continue
				}
				t.Run(string(fc.fault.Kind), func(t *testing.T) {
					if err := Inject(ctx, l, fc.fault); err != nil {
						t.Fatalf("Inject(%v): %v", fc.fault, err)
					}
					if err := Inject(ctx, l, fc.fault); !errors.Is(err, ErrFault) {
						t.Errorf("second Inject(%v) = %v, want ErrFault (already there)", fc.fault, err)
					}
					got, err := Faults(ctx, l)
					want := fc.fault
					_, _ = want.check(l)
					if err != nil || len(got) != 1 || got[0] != want {
						t.Errorf("Faults = %+v, %v; want [%+v]", got, err, want)
					}
					for _, fp := range fc.probes {
						port += 2
						t.Run(fp.name, func(t *testing.T) {
							fp.probe.wantOK = func(Config) bool { return fp.wantOK }
							runProbe(t, l, fp.probe, port)
						})
					}
					if fc.fault.Kind == FaultRateLimit {
						port += 2
						checkRate(t, l, fc.fault.RateBPS, port)
					}
					cleared, err := Clear(ctx, l, "", "")
					if err != nil || len(cleared) != 1 || cleared[0] != want {
						t.Errorf("Clear = %+v, %v; want [%+v]", cleared, err, want)
					}
					if again, err := Clear(ctx, l, "node-2", fc.fault.Kind); err != nil || len(again) != 0 {
						t.Errorf("second Clear = %+v, %v; want nothing, no error", again, err)
					}
					if left, err := Faults(ctx, l); err != nil || len(left) != 0 {
						t.Errorf("Faults after Clear = %+v, %v; want none", left, err)
					}
					// Every probe works again.
					for _, fp := range fc.probes {
						port += 2
						t.Run("cleared/"+fp.name, func(t *testing.T) {
							fp.probe.wantOK = func(Config) bool { return true }
							runProbe(t, l, fp.probe, port)
						})
					}
				})
			}
		})
	}
}

// checkRate measures host1 -> host2 and host2 -> host1 TCP throughput with
// iperf3 and wants both under twice the shaped rate.
func checkRate(t *testing.T, l *Lab, rate uint64, port int) {
	t.Helper()
	for _, dir := range []struct{ from, to int }{{1, 2}, {2, 1}} {
		srv := startIn(t, l.Nodes[dir.to-1].HostNetNSPath, "iperf3", "-s", "-1", "-p", strconv.Itoa(port))
		waitListening(t, l.Nodes[dir.to-1].HostNetNSPath, "t", port)
		out, err := runIn(t, 20*time.Second, l.Nodes[dir.from-1].HostNetNSPath,
			"iperf3", "-c", l.Nodes[dir.to-1].HostIP.String(), "-p", strconv.Itoa(port), "-t", "2", "-J", "--connect-timeout", "1000")
		srv.stop()
		if err != nil {
			t.Errorf("iperf3 host%d -> host%d: %v\n%s", dir.from, dir.to, err, out)
			continue
		}
		var res struct {
			End struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.End.SumReceived.BitsPerSecond <= 0 {
			t.Errorf("iperf3 host%d -> host%d: no throughput in its JSON (%v)", dir.from, dir.to, err)
			continue
		}
		bps := res.End.SumReceived.BitsPerSecond
		t.Logf("host%d -> host%d shaped to %d bit/s: %.0f bit/s", dir.from, dir.to, rate, bps)
		if bps > 2*float64(rate) {
			t.Errorf("host%d -> host%d: %.0f bit/s through a %d bit/s rate limit", dir.from, dir.to, bps, rate)
		}
		port++
	}
}
