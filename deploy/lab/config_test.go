package lab

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestDescribeInvalid(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		wantText string // the field and the value must be named
	}{
		{"empty prefix", Config{}, `Prefix ""`},
		{"upper case", Config{Prefix: "Lab"}, `Prefix "Lab"`},
		{"dash", Config{Prefix: "a-b"}, `Prefix "a-b"`},
		{"slash", Config{Prefix: "../x"}, `Prefix "../x"`},
		{"too long", Config{Prefix: strings.Repeat("a", MaxPrefixLen+1)}, "Prefix"},
		{"one node", Config{Prefix: "x", Nodes: 1}, "Nodes 1"},
		{"too many nodes", Config{Prefix: "x", Nodes: MaxNodes + 1}, "Nodes 17"},
		{"negative nodes", Config{Prefix: "x", Nodes: -2}, "Nodes -2"},
		{"unknown mode", Config{Prefix: "x", Mode: "ipip"}, `Mode "ipip"`},
		{"unknown family", Config{Prefix: "x", IPFamily: "ipv5"}, `IPFamily "ipv5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Describe(tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Describe(%+v) = %v, %v; want ErrInvalidConfig", tt.cfg, got, err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}

func TestDescribeLayout(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		wantNodes int
		wantMode  Mode
		// node to check, and its wanted fields
		index                                        int
		wantHost, wantPod, wantGW, wantSvc, wantVTEP string
		wantCIDR                                     string
		wantMAC                                      string
	}{
		{
			name: "defaults", cfg: Config{Prefix: "mp"}, wantNodes: 3, wantMode: ModeHostGW,
			index: 1, wantHost: "172.18.0.11", wantPod: "10.244.1.2", wantGW: "10.244.1.1",
			wantSvc: "10.96.0.11", wantCIDR: "10.244.1.0/24",
		},
		{
			name: "vxlan 16 nodes", cfg: Config{Prefix: "a1", Nodes: 16, Mode: ModeVXLAN}, wantNodes: 16, wantMode: ModeVXLAN,
			index: 16, wantHost: "172.18.0.26", wantPod: "10.244.16.2", wantGW: "10.244.16.1",
			wantSvc: "10.96.0.26", wantCIDR: "10.244.16.0/24", wantVTEP: "10.244.16.0", wantMAC: "0e:6c:61:62:00:10",
		},
		{
			name: "two nodes", cfg: Config{Prefix: "z", Nodes: 2, Mode: ModeVXLAN}, wantNodes: 2, wantMode: ModeVXLAN,
			index: 2, wantHost: "172.18.0.12", wantPod: "10.244.2.2", wantGW: "10.244.2.1",
			wantSvc: "10.96.0.12", wantCIDR: "10.244.2.0/24", wantVTEP: "10.244.2.0", wantMAC: "0e:6c:61:62:00:02",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Describe(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(l.Nodes); got != tt.wantNodes || l.Config.Nodes != tt.wantNodes {
				t.Fatalf("nodes = %d (Config.Nodes %d), want %d", got, l.Config.Nodes, tt.wantNodes)
			}
			if l.Mode != tt.wantMode || l.Logger == nil {
				t.Errorf("mode %q logger %v; want %q and a logger", l.Mode, l.Logger, tt.wantMode)
			}
			p := tt.cfg.Prefix
			if l.FabricNetNS != p+"-fabric" || l.FabricNetNSPath != "/run/netns/"+p+"-fabric" {
				t.Errorf("fabric %q %q", l.FabricNetNS, l.FabricNetNSPath)
			}
			if e := l.External; e.NetNS != p+"-ext" || e.NetNSPath != "/run/netns/"+p+"-ext" || e.IP.String() != "172.18.0.250" {
				t.Errorf("external %+v, want %s-ext at 172.18.0.250", e, p)
			}
			if cp := l.ControlPlane(); cp.Name != "node-1" {
				t.Errorf("ControlPlane = %s, want node-1", cp.Name)
			}
			n := l.Nodes[tt.index-1]
			idx := strings.TrimPrefix(n.Name, "node-")
			checks := []struct{ field, got, want string }{
				{"Name", n.Name, "node-" + idx},
				{"HostNetNS", n.HostNetNS, p + "-node" + idx},
				{"HostNetNSPath", n.HostNetNSPath, "/run/netns/" + p + "-node" + idx},
				{"PodNetNS", n.PodNetNS, p + "-pod" + idx},
				{"PodNetNSPath", n.PodNetNSPath, "/run/netns/" + p + "-pod" + idx},
				{"HostIP", n.HostIP.String(), tt.wantHost},
				{"PodIP", n.PodIP.String(), tt.wantPod},
				{"PodGateway", n.PodGateway.String(), tt.wantGW},
				{"ServiceIP", n.ServiceIP.String(), tt.wantSvc},
				{"PodCIDR", n.PodCIDR.String(), tt.wantCIDR},
				{"VTEPMAC", n.VTEPMAC.String(), tt.wantMAC},
			}
			if tt.wantVTEP != "" {
				checks = append(checks, struct{ field, got, want string }{"VTEPIP", n.VTEPIP.String(), tt.wantVTEP})
			} else if n.VTEPIP.IsValid() {
				t.Errorf("VTEPIP = %v in host-gw mode, want unset", n.VTEPIP)
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("node %d %s = %q, want %q", tt.index, c.field, c.got, c.want)
				}
			}
			if !FabricSubnet.Contains(l.External.IP) || l.External.IP == FabricSubnet.Addr() {
				t.Errorf("external IP %s not a host address in %s", l.External.IP, FabricSubnet)
			}
			for _, n := range l.Nodes {
				if n.HostIP == l.External.IP {
					t.Errorf("node %s has the external IP %s", n.Name, n.HostIP)
				}
				if !FabricSubnet.Contains(n.HostIP) || !ClusterCIDR.Contains(n.PodIP) || !ServiceCIDR.Contains(n.ServiceIP) || !n.PodCIDR.Contains(n.PodIP) {
					t.Errorf("node %s addresses outside their ranges: %+v", n.Name, n)
				}
			}
			if got, ok := l.Node(n.Name); !ok || got.Index != n.Index {
				t.Errorf("Node(%q) = %v, %v", n.Name, got.Index, ok)
			}
		})
	}
}

func TestNSExec(t *testing.T) {
	n := Node{HostNetNSPath: "/run/netns/x-node1", PodNetNSPath: "/run/netns/x-pod1"}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"NSExec", NSExec("/proc/1/ns/net", "ip", "addr"), []string{"nsenter", "--net=/proc/1/ns/net", "--", "ip", "addr"}},
		{"HostCommand", n.HostCommand("ping", "-c", "1", "x"), []string{"nsenter", "--net=/run/netns/x-node1", "--", "ping", "-c", "1", "x"}},
		{"PodCommand", n.PodCommand("true"), []string{"nsenter", "--net=/run/netns/x-pod1", "--", "true"}},
		{"External.Command", External{NetNSPath: "/run/netns/x-ext"}.Command("ss", "-tln"), []string{"nsenter", "--net=/run/netns/x-ext", "--", "ss", "-tln"}},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestParseNSName(t *testing.T) {
	tests := []struct {
		name   string
		wantOK bool
		want   nsName
	}{
		{"lt1-fabric", true, nsName{name: "lt1-fabric", class: classFabric}},
		{"lt1-ext", true, nsName{name: "lt1-ext", class: classExternal}},
		{"lt1-ext1", false, nsName{}},
		{"lt1-external", false, nsName{}},
		{"lt12-ext", false, nsName{}},
		{"lt1-node3", true, nsName{name: "lt1-node3", class: classNode, index: 3}},
		{"lt1-pod12", true, nsName{name: "lt1-pod12", class: classPod, index: 12}},
		{"lt1-pod", false, nsName{}},
		{"lt1-node1x", false, nsName{}},
		{"lt1-node-1", false, nsName{}},
		{"lt12-node1", false, nsName{}}, // another lab whose prefix starts alike
		{"xlt1-node1", false, nsName{}},
		{"lt1-fabric2", false, nsName{}},
		{"lt1-probe", false, nsName{}},
	}
	for _, tt := range tests {
		got, ok := parseNSName("lt1", tt.name)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("parseNSName(lt1, %q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestDisplayOrder(t *testing.T) {
	in := []string{"p-pod1", "p-pod2", "p-pod10", "p-node1", "p-ext", "p-node2", "p-node10", "p-fabric"}
	want := []string{"p-fabric", "p-ext", "p-node1", "p-pod1", "p-node2", "p-pod2", "p-node10", "p-pod10"}
	if got := displayOrder(in); !slices.Equal(got, want) {
		t.Errorf("displayOrder = %q, want %q", got, want)
	}
}

func TestRulesDropCrossNodePod(t *testing.T) {
	tests := []struct {
		drop      bool
		wantDrops int
	}{{false, 0}, {true, 2}}
	for _, tt := range tests {
		l, err := Describe(Config{Prefix: "r", DropCrossNodePod: tt.drop})
		if err != nil {
			t.Fatal(err)
		}
		rules := builder{lab: l}.rules(l.Nodes[0], l.Nodes[0].stacks(l.IPFamily)[0])
		if got := strings.Count(rules, "-j DROP"); got != tt.wantDrops {
			t.Errorf("drop=%v: %d DROP rules, want %d:\n%s", tt.drop, got, tt.wantDrops, rules)
		}
		// 3 services x 2 chains x 2 protocols, and never ICMP.
		if got := strings.Count(rules, "-j DNAT"); got != 12 || strings.Contains(rules, "icmp") {
			t.Errorf("%d DNAT rules, want 12 (TCP and UDP only):\n%s", got, rules)
		}
	}
}

func TestRulesPodEgress(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		node int
		// want are lines of the nat table, in this order, after the
		// existing masquerades.
		want []string
	}{
		{
			name: "host-gw node 1", cfg: Config{Prefix: "r"}, node: 1,
			want: []string{
				"-A POSTROUTING ! -s 10.244.0.0/16 -m conntrack --ctstate DNAT -j MASQUERADE",
				"-A POSTROUTING -s 10.244.1.2/32 -d 10.244.1.2/32 -j MASQUERADE",
				":MESHLAB-EGRESS - [0:0]",
				"-A POSTROUTING -s 10.244.1.0/24 -j MESHLAB-EGRESS",
				"-A MESHLAB-EGRESS -d 10.244.0.0/16 -j RETURN",
				"-A MESHLAB-EGRESS -d 10.96.0.0/12 -j RETURN",
				"-A MESHLAB-EGRESS -d 172.18.0.11/32 -j RETURN",
				"-A MESHLAB-EGRESS -d 172.18.0.12/32 -j RETURN",
				"-A MESHLAB-EGRESS -d 172.18.0.13/32 -j RETURN",
				"-A MESHLAB-EGRESS -j MASQUERADE",
				"COMMIT",
			},
		},
		{
			name: "vxlan with drops, node 2 of 2", cfg: Config{Prefix: "r", Nodes: 2, Mode: ModeVXLAN, DropCrossNodePod: true}, node: 2,
			want: []string{
				"-A POSTROUTING -s 10.244.2.2/32 -d 10.244.2.2/32 -j MASQUERADE",
				":MESHLAB-EGRESS - [0:0]",
				"-A POSTROUTING -s 10.244.2.0/24 -j MESHLAB-EGRESS",
				"-A MESHLAB-EGRESS -d 10.244.0.0/16 -j RETURN",
				"-A MESHLAB-EGRESS -d 10.96.0.0/12 -j RETURN",
				"-A MESHLAB-EGRESS -d 172.18.0.11/32 -j RETURN",
				"-A MESHLAB-EGRESS -d 172.18.0.12/32 -j RETURN",
				"-A MESHLAB-EGRESS -j MASQUERADE",
				"COMMIT",
				"*filter",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Describe(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			rules := builder{lab: l}.rules(l.Nodes[tt.node-1], l.Nodes[tt.node-1].stacks(l.IPFamily)[0])
			lines := strings.Split(rules, "\n")
			at := -1
			for _, w := range tt.want {
				i := slices.Index(lines[at+1:], w)
				if i < 0 {
					t.Fatalf("rules lack %q after line %d:\n%s", w, at+1, rules)
				}
				at += 1 + i
			}
			// The only MASQUERADEs are the two existing ones and the
			// egress chain's; it masquerades nothing but the node's pods.
			if got := strings.Count(rules, "-j MASQUERADE"); got != 3 {
				t.Errorf("%d MASQUERADE rules, want 3:\n%s", got, rules)
			}
			if got := strings.Count(rules, "-j MESHLAB-EGRESS"); got != 1 {
				t.Errorf("%d jumps to MESHLAB-EGRESS, want 1:\n%s", got, rules)
			}
			if strings.Contains(rules, ExternalIP.String()) {
				t.Errorf("rules name the external IP: egress must not depend on it:\n%s", rules)
			}
		})
	}
}

func TestParseIPAddrJSON(t *testing.T) {
	b, err := os.ReadFile("testdata/ip-addr-node-vxlan.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseIPAddrJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		mtu   int
		addrs []netip.Prefix
	}{
		"lo":        {65536, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		"eth0":      {1500, []netip.Prefix{netip.MustParsePrefix("172.18.0.11/24")}},
		"cni0":      {1450, []netip.Prefix{netip.MustParsePrefix("10.244.1.1/24")}},
		"vethpod0":  {1450, nil},
		"flannel.1": {1450, []netip.Prefix{netip.MustParsePrefix("10.244.1.0/32")}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d interfaces, want %d: %+v", len(got), len(want), got)
	}
	for _, i := range got {
		w, ok := want[i.Name]
		if !ok || i.MTU != w.mtu || !slices.Equal(i.Addrs, w.addrs) {
			t.Errorf("interface %+v, want %+v", i, w)
		}
	}
	if _, err := parseIPAddrJSON([]byte(`[{"ifname":"x","addr_info":[{"local":"nope"}]}]`)); err == nil {
		t.Error("bad address: want an error")
	}
}

func FuzzParseIPAddrJSON(f *testing.F) {
	if b, err := os.ReadFile("testdata/ip-addr-node-vxlan.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"ifname":"eth0","mtu":1500,"addr_info":[{"local":"10.0.0.1","prefixlen":99}]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ifs, err := parseIPAddrJSON(b)
		if err != nil {
			return
		}
		for _, i := range ifs {
			for _, a := range i.Addrs {
				_ = a.String()
			}
		}
	})
}
