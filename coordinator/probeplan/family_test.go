package probeplan

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestPeerIPv6(t *testing.T) {
	ip := netip.MustParseAddr
	dual := Peer{Name: "node-1", HostIP: ip("172.18.0.11"), PodIP: ip("10.244.1.2"), ServiceIP: ip("10.96.0.11"),
		HostIPv6: ip("fd00:18::11"), PodIPv6: ip("fd00:10:244:1::2"), ServiceIPv6: ip("fd00:10:96::11"), ProbePort: 7947}
	if err := dual.Validate(); err != nil {
		t.Fatal(err)
	}
	pp := dual.Proto()
	if pp.GetHostIpv6() != "fd00:18::11" || pp.GetPodIpv6() != "fd00:10:244:1::2" || pp.GetServiceIpv6() != "fd00:10:96::11" || pp.GetHostIp() != "172.18.0.11" {
		t.Errorf("Proto() = %v, want the IPv6 addresses in the *_ipv6 fields", pp)
	}
	for _, tt := range []struct {
		edit func(*Peer)
		want string
	}{
		{func(p *Peer) { p.HostIPv6 = ip("172.18.0.12") }, "host_ipv6 172.18.0.12: not an IPv6 address"},
		{func(p *Peer) { p.ServiceIPv6 = ip("ff02::1") }, "service_ipv6 ff02::1"},
	} {
		p := dual
		tt.edit(&p)
		if err := p.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want ErrInvalid with %q", err, tt.want)
		}
	}
}
