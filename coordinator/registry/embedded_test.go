package registry

import (
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestValidateRegisterEmbeddedIPv4 is a rogue agent registering IPv6
// addresses that carry an IPv4 address (IPv4-compatible ::a.b.c.d, which
// Linux's sit0 tunnels to a.b.c.d; IPv4-translated ::ffff:0:a.b.c.d;
// NAT64 64:ff9b::/96 and 64:ff9b:1::/48): tests sent there reach the
// IPv4 address inside, past the loopback, link-local, metadata and
// conflict checks that look at the IPv6 form only. No node's interface
// has such an address.
func TestValidateRegisterEmbeddedIPv4(t *testing.T) {
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	reg := func(network measurev1.Network, ip, service6 string) *agentv1.Register {
		r := &agentv1.Register{NodeName: "rogue", ProtocolVersion: protocol.Version, ServiceIpv6: service6,
			Addresses: []*measurev1.NetworkAddress{{Network: host, Ip: "172.18.0.11"}}}
		if ip != "" {
			r.Addresses = append(r.Addresses, &measurev1.NetworkAddress{Network: network, Ip: ip})
		}
		return r
	}
	strict := &AddressPolicy{}
	tests := []struct {
		name    string
		policy  *AddressPolicy
		reg     *agentv1.Register
		wantErr string // "" accepts
	}{
		{"IPv4-compatible loopback", strict, reg(host, "::127.0.0.1", ""), "embeds"},
		{"IPv4-compatible private", nil, reg(pod, "::10.0.0.1", ""), "embeds"},
		{"IPv4-translated metadata", strict, reg(pod, "::ffff:0:169.254.169.254", ""), "embeds"},
		{"NAT64 metadata", nil, reg(host, "64:ff9b::169.254.169.254", ""), "embeds"},
		{"NAT64 loopback", strict, reg(pod, "64:ff9b::7f00:1", ""), "embeds"},
		{"local-use NAT64", strict, reg(pod, "64:ff9b:1::a9fe:a9fe", ""), "embeds"},
		{"NAT64 service_ipv6", strict, reg(host, "", "64:ff9b::10.96.0.1"), "embeds"},
		{"6to4 loopback", strict, reg(pod, "2002:7f00:1::1", ""), "embeds"},
		{"6to4 private", nil, reg(host, "2002:a00:1::1", ""), "embeds"},
		{"plain IPv6 still accepted", strict, reg(pod, "fd00:10:244:1::2", "fd00:10:96::11"), ""},
		{"loopback ::1 left to the loopback class", nil, reg(pod, "::1", ""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validateRegister(tt.reg, tt.policy)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validateRegister = %v, want it accepted", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validateRegister = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
