package lab

import (
	"net/netip"
	"strings"
	"testing"
)

func TestDescribeFamilies(t *testing.T) {
	tests := []struct {
		name                         string
		cfg                          Config
		wantHost, wantPod, wantSvc   string // node 2's primary addresses
		wantHost6, wantPod6, wantSv6 string // node 2's IPv6 addresses ("" none)
		wantExt, wantExt6            string
		wantHostIPs                  int
	}{
		{"default ipv4", Config{Prefix: "x"}, "172.18.0.12", "10.244.2.2", "10.96.0.12", "", "", "", "172.18.0.250", "", 1},
		{"dual", Config{Prefix: "x", IPFamily: FamilyDual}, "172.18.0.12", "10.244.2.2", "10.96.0.12",
			"fd00:18::12", "fd00:10:244:2::2", "fd00:10:96::12", "172.18.0.250", "fd00:18::250", 2},
		{"ipv6 only", Config{Prefix: "x", IPFamily: FamilyIPv6}, "fd00:18::12", "fd00:10:244:2::2", "fd00:10:96::12",
			"fd00:18::12", "fd00:10:244:2::2", "fd00:10:96::12", "fd00:18::250", "fd00:18::250", 1},
	}
	str := func(a netip.Addr) string {
		if !a.IsValid() {
			return ""
		}
		return a.String()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Describe(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			n := l.Nodes[1]
			got := []string{str(n.HostIP), str(n.PodIP), str(n.ServiceIP), str(n.HostIPv6), str(n.PodIPv6), str(n.ServiceIPv6), str(l.External.IP), str(l.External.IPv6)}
			want := []string{tt.wantHost, tt.wantPod, tt.wantSvc, tt.wantHost6, tt.wantPod6, tt.wantSv6, tt.wantExt, tt.wantExt6}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("addresses = %q, want %q", got, want)
			}
			if len(n.HostIPs()) != tt.wantHostIPs || len(n.PodIPs()) != tt.wantHostIPs || len(n.ServiceIPs()) != tt.wantHostIPs {
				t.Errorf("HostIPs %v PodIPs %v ServiceIPs %v, want %d each", n.HostIPs(), n.PodIPs(), n.ServiceIPs(), tt.wantHostIPs)
			}
			for _, a := range append(n.HostIPs(), append(n.PodIPs(), n.ServiceIPs()...)...) {
				if a.Is6() && !netip.MustParsePrefix("fd00::/8").Contains(a) {
					t.Errorf("IPv6 address %s is not a ULA of fd00::/8", a)
				}
			}
		})
	}
}

func TestRulesIPv6(t *testing.T) {
	l, err := Describe(Config{Prefix: "x", IPFamily: FamilyDual, DropCrossNodePod: true})
	if err != nil {
		t.Fatal(err)
	}
	n := l.Nodes[0]
	st := n.stacks(l.IPFamily)
	if len(st) != 2 || st[0].v6 || !st[1].v6 {
		t.Fatalf("stacks = %+v, want IPv4 then IPv6", st)
	}
	v4, v6 := builder{lab: l}.rules(n, st[0]), builder{lab: l}.rules(n, st[1])
	for _, want := range []string{
		"-A PREROUTING -d fd00:10:96::12/128 -p tcp -j DNAT --to-destination fd00:10:244:2::2\n",
		"-A OUTPUT -d fd00:10:96::13/128 -p udp -j DNAT --to-destination fd00:10:244:3::2\n",
		"-A POSTROUTING ! -s fd00:10:244::/56 -m conntrack --ctstate DNAT -j MASQUERADE\n",
		"-A MESHLAB-EGRESS -d fd00:18::12/128 -j RETURN\n",
		"-A FORWARD -s fd00:10:244:1::/64 -d fd00:10:244:2::/64 -m conntrack --ctstate NEW -j DROP\n",
	} {
		if !strings.Contains(v6, want) {
			t.Errorf("IPv6 rules lack %q:\n%s", want, v6)
		}
	}
	if strings.Contains(v6, "10.96.") || strings.Contains(v4, "fd00:") {
		t.Errorf("families mixed:\nIPv4:\n%s\nIPv6:\n%s", v4, v6)
	}
}
