package registry

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestValidateRegisterFamilies(t *testing.T) {
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	v4, v6 := measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6
	reg := func(service, service6 string, addrs ...any) *agentv1.Register {
		r := &agentv1.Register{NodeName: "node-1", ProtocolVersion: protocol.Version, ServiceIp: service, ServiceIpv6: service6}
		for i := 0; i < len(addrs); i += 2 {
			r.Addresses = append(r.Addresses, &measurev1.NetworkAddress{Network: addrs[i].(measurev1.Network), Ip: addrs[i+1].(string)})
		}
		return r
	}
	cidrs := &AddressPolicy{NodeCIDRs: prefixes("172.18.0.0/24"), PodCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56"), ServiceCIDRs: prefixes("10.96.0.0/12", "fd00:10:96::/112")}
	tests := []struct {
		name       string
		policy     *AddressPolicy
		reg        *agentv1.Register
		wantErr    string
		wantHost6  string // Addr(host, IPv6)
		wantPod4   string // Addr(pod, IPv4)
		wantSvc6   string // ServiceAddr(IPv6)
		wantFamily int    // len(Families())
	}{
		{"dual stack", nil, reg("10.96.0.11", "fd00:10:96::11", host, "172.18.0.11", pod, "10.244.1.2", host, "fd00:18::11", pod, "fd00:10:244:1::2"),
			"", "fd00:18::11", "10.244.1.2", "fd00:10:96::11", 2},
		{"dual stack, IPv6 first", nil, reg("", "", host, "fd00:18::11", host, "172.18.0.11", pod, "fd00:10:244:1::2", pod, "10.244.1.2"),
			"", "fd00:18::11", "10.244.1.2", "", 2},
		{"IPv6 only", nil, reg("", "fd00:10:96::11", host, "fd00:18::11", pod, "fd00:10:244:1::2"), "", "fd00:18::11", "", "fd00:10:96::11", 1},
		{"IPv4 only", nil, reg("10.96.0.11", "", host, "172.18.0.11"), "", "", "", "", 1},
		{"two IPv4 host addresses", nil, reg("", "", host, "172.18.0.11", host, "172.18.0.12"), "a second address for network NETWORK_HOST (ipv4)", "", "", "", 0},
		{"three host addresses", nil, reg("", "", host, "172.18.0.11", host, "fd00:18::11", host, "fd00:18::12"), "a second address for network NETWORK_HOST (ipv6)", "", "", "", 0},
		{"service_ipv6 not IPv6", nil, reg("", "10.96.0.11", host, "172.18.0.11"), "service_ipv6: 10.96.0.11 is not an IPv6", "", "", "", 0},
		{"service_ipv6 multicast", nil, reg("", "ff02::1", host, "172.18.0.11"), "service_ipv6", "", "", "", 0},
		{"IPv6 pod outside pod_cidrs", cidrs, reg("", "", host, "172.18.0.11", pod, "10.244.1.2", pod, "fd00:99::2"), "fd00:99::2", "", "", "", 0},
		{"IPv6 host outside node_cidrs", cidrs, reg("", "", host, "172.18.0.11", host, "fd00:18::11"), "fd00:18::11", "", "", "", 0},
		{"IPv6 in the CIDRs", cidrs, reg("10.96.0.11", "fd00:10:96::11", host, "172.18.0.11", pod, "10.244.1.2", pod, "fd00:10:244:1::2"),
			"", "", "10.244.1.2", "fd00:10:96::11", 1},
		{"IPv6 unspecified", nil, reg("", "", host, "172.18.0.11", pod, "::"), "unspecified", "", "", "", 0},
	}
	str := func(a netip.Addr) string {
		if !a.IsValid() {
			return ""
		}
		return a.String()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := validateRegister(tt.reg, tt.policy)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("validateRegister = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{str(n.Addr(host, v6)), str(n.Addr(pod, v4)), str(n.ServiceAddr(v6))}
			want := []string{tt.wantHost6, tt.wantPod4, tt.wantSvc6}
			if strings.Join(got, ",") != strings.Join(want, ",") || len(n.Families()) != tt.wantFamily {
				t.Errorf("addresses %q families %v, want %q and %d families", got, n.Families(), want, tt.wantFamily)
			}
			if n.HostIP.Is6() && n.HostIPv6.IsValid() {
				t.Errorf("HostIP %s is IPv6 beside HostIPv6 %s: IPv4 must be the primary", n.HostIP, n.HostIPv6)
			}
		})
	}
}

func TestNodeEndpointServiceIPv6(t *testing.T) {
	dual := Node{Name: "n", ServiceIP: netip.MustParseAddr("10.96.0.11"), ServiceIPv6: netip.MustParseAddr("fd00:10:96::11")}
	only6 := Node{Name: "n", ServiceIP: netip.MustParseAddr("fd00:10:96::11")}
	for _, tt := range []struct {
		n        Node
		svc      string
		want4    string
		wantIPv6 string
	}{
		{dual, "10.96.0.11", "10.96.0.11", "fd00:10:96::11"},
		{only6, "fd00:10:96::11", "", "fd00:10:96::11"},
	} {
		ep := nodeEndpoint(tt.n, nil, tt.svc)
		if ep.GetServiceIp() != tt.want4 || ep.GetServiceIpv6() != tt.wantIPv6 {
			t.Errorf("nodeEndpoint(%v) service_ip %q service_ipv6 %q, want %q %q", tt.n, ep.GetServiceIp(), ep.GetServiceIpv6(), tt.want4, tt.wantIPv6)
		}
	}
}
