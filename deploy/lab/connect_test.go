package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
)

// probe is one bounded connectivity check, run inside lab namespaces only.
type probe struct {
	name string
	// from is the namespace path the client runs in.
	from func(l *Lab) string
	// server, if set, is started in serverNS first (and killed afterwards);
	// port is substituted for "PORT" and port+1 for "PORT1" in both argvs.
	serverNS func(l *Lab) string
	server   []string
	listen   string // "t" or "u": what to wait for before the client runs
	// client is the argv; "IP" placeholders are filled by target.
	client []string
	target func(l *Lab) string
	// wantOK says whether the client must succeed, per lab config.
	wantOK func(cfg Config) bool
}

func always(Config) bool             { return true }
func never(Config) bool              { return false }
func unlessDrop(c Config) bool       { return !c.DropCrossNodePod }
func hostGWOnly(c Config) bool       { return c.Mode == ModeHostGW }
func hostGWUnlessDrop(c Config) bool { return c.Mode == ModeHostGW && !c.DropCrossNodePod }
func host(i int) func(*Lab) string   { return func(l *Lab) string { return l.Nodes[i-1].HostNetNSPath } }
func pod(i int) func(*Lab) string    { return func(l *Lab) string { return l.Nodes[i-1].PodNetNSPath } }
func hostIP(i int) func(*Lab) string {
	return func(l *Lab) string { return l.Nodes[i-1].HostIP.String() }
}
func podIP(i int) func(*Lab) string {
	return func(l *Lab) string { return l.Nodes[i-1].PodIP.String() }
}
func serviceIP(i int) func(*Lab) string {
	return func(l *Lab) string { return l.Nodes[i-1].ServiceIP.String() }
}
func constant(s string) func(*Lab) string { return func(*Lab) string { return s } }
func external(l *Lab) string              { return l.External.NetNSPath }
func externalIP(l *Lab) string            { return l.External.IP.String() }

var (
	ping     = []string{"ping", "-n", "-q", "-c", "2", "-i", "0.2", "-W", "1", "IP"}
	pingOnce = []string{"ping", "-n", "-q", "-c", "1", "-W", "1", "IP"}
	pingDF   = func(size int) []string {
		return []string{"ping", "-n", "-q", "-c", "1", "-W", "1", "-M", "do", "-s", strconv.Itoa(size), "IP"}
	}
	iperfSrv  = []string{"iperf3", "-s", "-1", "-p", "PORT"}
	iperfTCP  = []string{"iperf3", "-c", "IP", "-p", "PORT", "-t", "1", "--connect-timeout", "1000"}
	iperfUDP  = []string{"iperf3", "-c", "IP", "-p", "PORT", "-t", "1", "-u", "-b", "10M", "--connect-timeout", "1000"}
	qperfSrv  = []string{"qperf", "-lp", "PORT"}
	qperfLat  = []string{"qperf", "-lp", "PORT", "-ip", "PORT1", "-t", "1", "IP", "tcp_lat"}
	routeGet  = []string{"ip", "route", "get", "IP"}
	testNetIP = "192.0.2.1" // TEST-NET-1: only asked about, never sent to
)

var probes = []probe{
	{name: "host1 to host2 ping", from: host(1), client: ping, target: hostIP(2), wantOK: always},
	{name: "host1 to pod2 ping", from: host(1), client: ping, target: podIP(2), wantOK: always},
	{name: "host3 to pod1 ping", from: host(3), client: ping, target: podIP(1), wantOK: always},
	{name: "pod1 to pod2 ping", from: pod(1), client: ping, target: podIP(2), wantOK: unlessDrop},
	{name: "pod3 to pod1 ping", from: pod(3), client: ping, target: podIP(1), wantOK: unlessDrop},
	{name: "pod1 to host2 ping", from: pod(1), client: ping, target: hostIP(2), wantOK: always},
	{name: "pod1 to service2 ping is not DNATed", from: pod(1), client: pingOnce, target: serviceIP(2), wantOK: never},
	{name: "node has no route out of the lab", from: host(1), client: routeGet, target: constant(testNetIP), wantOK: never},
	// MTU: 1422+28 = 1450 fits everywhere; 1472+28 = 1500 only without vxlan.
	{name: "pod1 to pod2 DF 1450", from: pod(1), client: pingDF(1422), target: podIP(2), wantOK: unlessDrop},
	{name: "pod1 to pod2 DF 1500", from: pod(1), client: pingDF(1472), target: podIP(2), wantOK: hostGWUnlessDrop},
	{name: "host1 to pod2 DF 1451 fails in vxlan", from: host(1), client: pingDF(1423), target: podIP(2), wantOK: hostGWOnly},
	{name: "host1 to host2 DF 1500", from: host(1), client: pingDF(1472), target: hostIP(2), wantOK: always},
	// Services: TCP and UDP on any port, from pods and hosts.
	{
		name: "pod1 to service2 TCP (iperf3)", from: pod(1), target: serviceIP(2), client: iperfTCP,
		serverNS: pod(2), server: iperfSrv, listen: "t", wantOK: unlessDrop,
	},
	{
		name: "pod1 to service2 UDP (iperf3 -u)", from: pod(1), target: serviceIP(2), client: iperfUDP,
		serverNS: pod(2), server: iperfSrv, listen: "t", wantOK: unlessDrop,
	},
	{
		name: "host3 to service2 TCP (iperf3)", from: host(3), target: serviceIP(2), client: iperfTCP,
		serverNS: pod(2), server: iperfSrv, listen: "t", wantOK: always,
	},
	{
		name: "host1 to service1 TCP, same node", from: host(1), target: serviceIP(1), client: iperfTCP,
		serverNS: pod(1), server: iperfSrv, listen: "t", wantOK: always,
	},
	{
		name: "pod1 to its own service (hairpin)", from: pod(1), target: serviceIP(1), client: iperfTCP,
		serverNS: pod(1), server: iperfSrv, listen: "t", wantOK: always,
	},
	{
		name: "pod3 to service2 qperf tcp_lat, pinned ports", from: pod(3), target: serviceIP(2), client: qperfLat,
		serverNS: pod(2), server: qperfSrv, listen: "t", wantOK: unlessDrop,
	},
	{
		name: "host1 to service3 qperf tcp_lat, pinned ports", from: host(1), target: serviceIP(3), client: qperfLat,
		serverNS: pod(3), server: qperfSrv, listen: "t", wantOK: always,
	},
	// The external host: every node's host and pod network reaches it
	// (pods masqueraded to their node IP), whatever the mode or the drops;
	// it reaches the node IPs and nothing else.
	{name: "host1 to external ping", from: host(1), client: ping, target: externalIP, wantOK: always},
	{name: "host2 to external ping", from: host(2), client: ping, target: externalIP, wantOK: always},
	{name: "host3 to external ping", from: host(3), client: ping, target: externalIP, wantOK: always},
	{name: "pod1 to external ping", from: pod(1), client: ping, target: externalIP, wantOK: always},
	{name: "pod2 to external ping", from: pod(2), client: ping, target: externalIP, wantOK: always},
	{name: "pod3 to external ping", from: pod(3), client: ping, target: externalIP, wantOK: always},
	{name: "external to host2 ping", from: external, client: ping, target: hostIP(2), wantOK: always},
	{
		name: "pod3 to external TCP (iperf3)", from: pod(3), target: externalIP, client: iperfTCP,
		serverNS: external, server: iperfSrv, listen: "t", wantOK: always,
	},
	{
		name: "pod1 to external UDP (iperf3 -u)", from: pod(1), target: externalIP, client: iperfUDP,
		serverNS: external, server: iperfSrv, listen: "t", wantOK: always,
	},
	{name: "external has no route out of the lab", from: external, client: routeGet, target: constant(testNetIP), wantOK: never},
	{name: "external has no route to pods", from: external, client: routeGet, target: podIP(1), wantOK: never},
	{name: "external has no route to services", from: external, client: routeGet, target: serviceIP(1), wantOK: never},
}

func TestConnectivity(t *testing.T) {
	requireLab(t)
	t.Parallel()
	configs := []Config{
		{Mode: ModeHostGW},
		{Mode: ModeVXLAN},
		{Mode: ModeHostGW, DropCrossNodePod: true},
		{Mode: ModeVXLAN, DropCrossNodePod: true},
	}
	for _, cfg := range configs {
		name := string(cfg.Mode)
		if cfg.DropCrossNodePod {
			name += "/drop-cross-node-pod"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg.Prefix, cfg.Nodes, cfg.Logger = testPrefix(t), 3, testutil.StreamLogger(t)
			l := upLab(t, cfg)
			port := 15000
			for _, p := range probes {
				port += 2
				t.Run(p.name, func(t *testing.T) {
					runProbe(t, l, p, port)
				})
			}
		})
	}
}

// runProbe runs p (starting its server first) and checks the outcome.
func runProbe(t *testing.T, l *Lab, p probe, port int) {
	fill := func(argv []string) []string {
		out := make([]string, len(argv))
		for i, a := range argv {
			switch a {
			case "IP":
				a = p.target(l)
			case "PORT":
				a = strconv.Itoa(port)
			case "PORT1":
				a = strconv.Itoa(port + 1)
			}
			out[i] = a
		}
		return out
	}
	var srv *server
	if p.server != nil {
		srv = startIn(t, p.serverNS(l), fill(p.server)...)
		waitListening(t, p.serverNS(l), p.listen, port)
	}
	start := time.Now()
	out, err := runIn(t, 15*time.Second, p.from(l), fill(p.client)...)
	elapsed := time.Since(start)
	if srv != nil {
		srv.stop()
	}
	want := p.wantOK(l.Config)
	summary := lastLines(out, 3)
	switch {
	case want && err != nil:
		t.Errorf("%v: want success, got %v after %v\n%s", fill(p.client), err, elapsed, out)
	case !want:
		if ferr := checkFailure(p.client, err, out); ferr != nil {
			t.Errorf("%v: want it to fail as the network makes it: %v\n%s", fill(p.client), ferr, out)
			return
		}
		fallthrough
	default:
		t.Logf("%v: ok=%v in %v: %s", fill(p.client), err == nil, elapsed.Round(time.Millisecond), summary)
	}
}

// failure is how a client fails when the network stops it: its exit
// status and what it says, so that a client that fails for another
// reason (a bad flag, a missing server, a timeout of runIn) does not pass
// for a refusal by the lab.
type failure struct {
	exit int
	says *regexp.Regexp
}

// failures are the network failures of each client program the probes
// run: ping's 1 with no reply (2 is any other error: a bad flag, an
// unknown host), ip route get's 2 with no route (255 is a bad command
// line), iperf3's and qperf's 1 with their connect error (their 1 is any
// error, so the message tells).
var failures = map[string]failure{
	"ping":   {1, regexp.MustCompile(`(?m)^\d+ packets transmitted, 0 received`)},
	"ip":     {2, regexp.MustCompile(`Network is unreachable|No route to host`)},
	"iperf3": {1, regexp.MustCompile(`unable to connect to server`)},
	"qperf":  {1, regexp.MustCompile(`failed to connect`)},
}

// checkFailure returns nil if client (a probe's argv), which must fail,
// ended with err and out (runIn's) as its program does when the network
// stops it, else an error saying how it ended instead.
func checkFailure(client []string, err error, out string) error {
	f, ok := failures[client[0]]
	if !ok {
		return fmt.Errorf("no known network failure of %s: add it to failures", client[0])
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return errors.New("it worked")
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("runIn's timeout, not the network, ended it: %w", err)
	case !errors.As(err, &exit):
		return fmt.Errorf("it did not run: %w", err)
	case exit.ExitCode() != f.exit:
		return fmt.Errorf("exit status %d, want %d", exit.ExitCode(), f.exit)
	case !f.says.MatchString(out):
		return fmt.Errorf("exit status %d without %q in its output", f.exit, f.says)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// TestCheckFailure: a client that must fail passes only with its
// program's network failure, not with any non-zero exit.
func TestCheckFailure(t *testing.T) {
	exitErr := func(code int) error {
		err := exec.Command("sh", "-c", "exit "+strconv.Itoa(code)).Run()
		if err == nil {
			t.Fatalf("sh -c 'exit %d' succeeded", code)
		}
		return err
	}
	const pingLost = "--- 10.244.2.2 ping statistics ---\n2 packets transmitted, 0 received, 100% packet loss, time 1010ms\n"
	const pingTooBig = "ping: local error: message too long, mtu=1450\n\n--- 10.244.2.2 ping statistics ---\n" +
		"1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms\n"
	timedOut := fmt.Errorf("timed out after 15s: %w", errors.Join(context.DeadlineExceeded, exitErr(1)))
	tests := []struct {
		name   string
		client []string
		err    error
		out    string
		wantOK bool
	}{
		{"ping: no reply", ping, exitErr(1), pingLost, true},
		{"ping: DF too big", pingDF(1472), exitErr(1), pingTooBig, true},
		{"ping: a bad flag", ping, exitErr(2), "ping: invalid argument: '0.2x'\n", false},
		{"ping: exit 1 from nsenter", ping, exitErr(1), "nsenter: cannot open /run/netns/x: No such file or directory\n", false},
		{"ping: worked", ping, nil, "2 packets transmitted, 2 received, 0% packet loss\n", false},
		{"ping: runIn's timeout", ping, timedOut, pingLost, false},
		{"ip route get: no route", routeGet, exitErr(2), "RTNETLINK answers: Network is unreachable\n", true},
		{"ip route get: a bad command line", routeGet, exitErr(255), "Error: any valid prefix is expected rather than \"x\".\n", false},
		{"ip route get: exit 2 for another reason", routeGet, exitErr(2), "RTNETLINK answers: Operation not permitted\n", false},
		{"iperf3: connect timed out", iperfTCP, exitErr(1),
			"iperf3: error - unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.: Connection timed out\n", true},
		{"iperf3: a bad flag", iperfTCP, exitErr(1), "iperf3: parameter error - must either be a client (-c) or server (-s)\n", false},
		{"qperf: connect failed", qperfLat, exitErr(1), "tcp_lat:\n10.96.0.2: failed to connect\n", true},
		{"qperf: a bad test name", qperfLat, exitErr(1), "qperf: bad test: tcp_lt\n", false},
		{"not started", ping, &exec.Error{Name: "nsenter", Err: exec.ErrNotFound}, "", false},
		{"a program with no known failure", []string{"curl", "IP"}, exitErr(7), "curl: (7) Failed to connect\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkFailure(tt.client, tt.err, tt.out)
			if (err == nil) != tt.wantOK {
				t.Errorf("checkFailure = %v, want ok=%t", err, tt.wantOK)
			}
		})
	}
}
