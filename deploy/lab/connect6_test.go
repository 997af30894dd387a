package lab

import (
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

func hostIPv6(i int) func(*Lab) string {
	return func(l *Lab) string { return l.Nodes[i-1].HostIPv6.String() }
}
func podIPv6(i int) func(*Lab) string {
	return func(l *Lab) string { return l.Nodes[i-1].PodIPv6.String() }
}
func serviceIPv6(i int) func(*Lab) string {
	return func(l *Lab) string { return l.Nodes[i-1].ServiceIPv6.String() }
}
func externalIPv6(l *Lab) string { return l.External.IPv6.String() }

var (
	ping6     = []string{"ping", "-6", "-n", "-q", "-c", "2", "-i", "0.2", "-W", "1", "IP"}
	iperfTCP6 = []string{"iperf3", "-6", "-c", "IP", "-p", "PORT", "-t", "1", "--connect-timeout", "1000"}
)

// probes6 are the IPv6 paths of a lab with IPv6 (FamilyIPv6, FamilyDual):
// the same reachability as IPv4, with ip6tables DNAT for the ClusterIPs.
var probes6 = []probe{
	{name: "host1 to host2 ping6", from: host(1), client: ping6, target: hostIPv6(2), wantOK: always},
	{name: "host1 to pod2 ping6", from: host(1), client: ping6, target: podIPv6(2), wantOK: always},
	{name: "pod1 to pod3 ping6", from: pod(1), client: ping6, target: podIPv6(3), wantOK: unlessDrop},
	{name: "pod2 to host1 ping6", from: pod(2), client: ping6, target: hostIPv6(1), wantOK: always},
	{name: "pod1 to external ping6 (masqueraded)", from: pod(1), client: ping6, target: externalIPv6, wantOK: always},
	{
		name: "pod1 to service2 TCP (iperf3 -6)", from: pod(1), target: serviceIPv6(2), client: iperfTCP6,
		serverNS: pod(2), server: iperfSrv, listen: "t", wantOK: unlessDrop,
	},
	{
		name: "host3 to service2 TCP (iperf3 -6)", from: host(3), target: serviceIPv6(2), client: iperfTCP6,
		serverNS: pod(2), server: iperfSrv, listen: "t", wantOK: always,
	},
	{
		name: "pod1 to its own IPv6 service (hairpin)", from: pod(1), target: serviceIPv6(1), client: iperfTCP6,
		serverNS: pod(1), server: iperfSrv, listen: "t", wantOK: always,
	},
	{
		name: "pod3 to service2 qperf tcp_lat over IPv6, pinned ports", from: pod(3), target: serviceIPv6(2), client: qperfLat,
		serverNS: pod(2), server: qperfSrv, listen: "t", wantOK: unlessDrop,
	},
	{name: "external has no IPv6 route to pods", from: external, client: routeGet, target: podIPv6(1), wantOK: never},
}

func TestConnectivityIPv6(t *testing.T) {
	requireLab(t)
	t.Parallel()
	configs := []Config{
		{Mode: ModeHostGW, IPFamily: FamilyDual},
		{Mode: ModeVXLAN, IPFamily: FamilyDual},
		{Mode: ModeVXLAN, IPFamily: FamilyIPv6, DropCrossNodePod: true},
	}
	for _, cfg := range configs {
		name := string(cfg.Mode) + "/" + string(cfg.IPFamily)
		if cfg.DropCrossNodePod {
			name += "/drop-cross-node-pod"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg.Prefix, cfg.Nodes, cfg.Logger = testPrefix(t), 3, testutil.StreamLogger(t)
			l := upLab(t, cfg)
			port := 16000
			for _, p := range probes6 {
				port += 2
				t.Run(p.name, func(t *testing.T) {
					runProbe(t, l, p, port)
				})
			}
			if cfg.IPFamily == FamilyDual {
				// IPv4 still works beside IPv6.
				for _, p := range probes[:4] {
					port += 2
					t.Run("ipv4 "+p.name, func(t *testing.T) { runProbe(t, l, p, port) })
				}
			}
		})
	}
}
