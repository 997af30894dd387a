package probe

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestTargetsFamilies: each listed family probes the peer's address of
// it; no families is IPv4 unlabelled (as before families); IPv6 needs
// the peer's IPv6 address and an IPv6 source on the network; IPv4
// phases do not move when IPv6 is added; bad families are refused.
func TestTargetsFamilies(t *testing.T) {
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	dual := &agentv1.ProbePeer{NodeName: "a", HostIp: "10.0.0.1", HostIpv6: "fd00::1", ProbePort: 7000, HostMtuBytes: 1500}
	v4only := &agentv1.ProbePeer{NodeName: "b", HostIp: "10.0.0.2", ProbePort: 7000, HostMtuBytes: 1500}
	src6 := netip.MustParseAddr("fd00::9")
	tests := []struct {
		name    string
		fams    []measurev1.IPFamily
		peer    *agentv1.ProbePeer
		src6    netip.Addr
		want    []string // fam/kind/dst/size
		wantErr string
	}{
		{name: "no families: IPv4 unlabelled", peer: dual, src6: src6,
			want: []string{"0/1/10.0.0.1/56", "0/2/10.0.0.1/1472", "0/3/10.0.0.1/0"}},
		{name: "IPv4 listed", fams: []measurev1.IPFamily{v4}, peer: dual, src6: src6,
			want: []string{"1/1/10.0.0.1/56", "1/2/10.0.0.1/1472", "1/3/10.0.0.1/0"}},
		{name: "dual", fams: []measurev1.IPFamily{v4, v6}, peer: dual, src6: src6,
			want: []string{"1/1/10.0.0.1/56", "1/2/10.0.0.1/1472", "1/3/10.0.0.1/0", "2/1/fd00::1/56", "2/2/fd00::1/1452", "2/3/fd00::1/0"}},
		{name: "IPv6 to a peer without one", fams: []measurev1.IPFamily{v4, v6}, peer: v4only, src6: src6,
			want: []string{"1/1/10.0.0.2/56", "1/2/10.0.0.2/1472", "1/3/10.0.0.2/0"}},
		{name: "IPv6 without a source address", fams: []measurev1.IPFamily{v6}, peer: dual},
		{name: "unknown family", fams: []measurev1.IPFamily{3}, peer: dual, wantErr: "settings.ip_families[0]"},
		{name: "family twice", fams: []measurev1.IPFamily{v6, v6}, peer: dual, wantErr: "settings.ip_families[1]"},
		{name: "IPv4 in host_ipv6", peer: &agentv1.ProbePeer{NodeName: "c", HostIp: "10.0.0.3", HostIpv6: "10.0.0.4"}, wantErr: "host_ipv6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(Config{Node: "self", Host: Network{Net: measurev1.Network_NETWORK_HOST, IPv6: tt.src6, MTU: 1500}, Report: func(*agentv1.ProbeReport) {}})
			if err != nil {
				t.Fatal(err)
			}
			s := testSettings()
			s.Kinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, measurev1.ProbeKind_PROBE_KIND_TCP}
			s.IpFamilies = tt.fams
			_, err = p.Apply(&agentv1.ProbePlan{Version: 1, Settings: s, Upsert: []*agentv1.ProbePeer{tt.peer}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply: %v, want an error naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ts := targets("self", []*Network{&p.cfg.Host}, p.held())
			var got []string
			for _, tg := range ts {
				got = append(got, fmt.Sprintf("%d/%d/%s/%d", tg.key.fam, tg.key.kind, tg.dst, tg.size))
				if !tg.key.v6() {
					k := tg.key
					k.fam = 0
					if phase("self", tg.key, protocol.ProbeMinInterval) != phase("self", k, protocol.ProbeMinInterval) {
						t.Errorf("%v: the IPv4 phase depends on the label", tg.key)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("targets %v, want %v", got, tt.want)
			}
		})
	}
}
