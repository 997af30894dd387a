package registry

import (
	"net/netip"
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// fuzzPolicies are the policies FuzzValidateRegister checks against.
var fuzzPolicies = []*AddressPolicy{
	{},
	permissive,
	{Allow: []AddressClass{ClassLoopback}, NodeCIDRs: prefixes("10.0.0.0/8", "127.0.0.0/8", "fd00::/8"),
		PodCIDRs: prefixes("10.244.0.0/16", "fd00:244::/48"), ServiceCIDRs: prefixes("10.96.0.0/12")},
}

// FuzzValidateRegister builds Register messages from fuzz strings and
// numbers, and from fuzz bytes decoded as a Register, and checks that
// validateRegister never panics and that every registration it accepts
// satisfies its policy: addresses of allowed classes inside the CIDRs,
// ports in range (the iperf3 and qperf ports in force never 0), texts
// printable and short. `go test` runs the seed corpus (testdata/fuzz and
// the seeds below); `go test -fuzz FuzzValidateRegister` explores.
func FuzzValidateRegister(f *testing.F) {
	f.Add(uint8(0), "node-1", "10.0.0.1", "10.244.0.2", "10.96.0.10", "v1", uint32(0), uint32(0), uint32(0), uint32(8080), uint32(7947), []byte(nil))
	f.Add(uint8(1), "node-2", "169.254.169.254", "", "", "v1", uint32(99999), uint32(5201), uint32(0), uint32(0), uint32(0), []byte(nil))
	f.Add(uint8(2), "node-3", "127.0.0.1", "fe80::1", "::1", "v\x1b[2J", uint32(7000), uint32(7000), uint32(7000), uint32(65536), uint32(1), []byte(nil))
	f.Add(uint8(0), "a", "::ffff:10.0.0.1", "10.0.0.1%eth0", "224.0.0.1", "", uint32(65535), uint32(1), uint32(2), uint32(3), uint32(4), []byte(nil))
	f.Add(uint8(1), "b", "::127.0.0.1", "64:ff9b::a9fe:a9fe", "::ffff:0:10.96.0.1", "", uint32(0), uint32(0), uint32(0), uint32(0), uint32(0), []byte(nil))
	seed, err := proto.Marshal(register("10.0.0.1", "10.244.1.2", "10.96.0.1"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(2), "", "", "", "", "", uint32(0), uint32(0), uint32(0), uint32(0), uint32(0), seed)
	dual := register("10.0.0.1", "10.244.1.2", "10.96.0.1")
	dual.ServiceIpv6 = "fd00:10:96::1"
	dual.Addresses = append(dual.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_HOST, Ip: "fd00:18::11"},
		&measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_POD, Ip: "fd00:10:244:1::2"})
	if seed, err = proto.Marshal(dual); err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), "", "", "", "", "", uint32(0), uint32(0), uint32(0), uint32(0), uint32(0), seed)
	f.Fuzz(func(t *testing.T, pol uint8, name, host, pod, service, version string, iperf3, qperf, qperfData, httpPort, probe uint32, raw []byte) {
		policy := fuzzPolicies[int(pol)%len(fuzzPolicies)]
		reg := register(host, pod, service)
		reg.NodeName, reg.AgentVersion = name, version
		reg.Iperf3Port, reg.QperfPort, reg.QperfDataPort, reg.HttpPort, reg.ProbePort, reg.GossipPort = iperf3, qperf, qperfData, httpPort, probe, probe^iperf3
		reg.Tools = []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_PING, Version: version}}
		checkAccepted(t, policy, reg)
		decoded := &agentv1.Register{}
		if proto.Unmarshal(raw, decoded) == nil {
			checkAccepted(t, policy, decoded)
		}
	})
}

// checkAccepted validates reg and, if it is accepted, checks the Node
// against the policy.
func checkAccepted(t *testing.T, policy *AddressPolicy, reg *agentv1.Register) {
	t.Helper()
	n, err := validateRegister(reg, policy)
	if err != nil {
		return
	}
	if err := protocol.ValidateNodeName(n.Name); err != nil || n.Name != reg.GetNodeName() {
		t.Fatalf("accepted node name %q: %v", reg.GetNodeName(), err)
	}
	if !n.HostIP.IsValid() {
		t.Fatalf("accepted %v without a host IP", reg)
	}
	for _, v6 := range []netip.Addr{n.HostIPv6, n.PodIPv6, n.ServiceIPv6} {
		if v6.IsValid() && (!v6.Is6() || v6.Is4In6()) {
			t.Fatalf("accepted %s as an IPv6 address of %v", v6, reg)
		}
	}
	if n.HostIPv6.IsValid() && !n.HostIP.Is4() || n.PodIPv6.IsValid() && !n.PodIP.Is4() || n.ServiceIPv6.IsValid() && !n.ServiceIP.Is4() {
		t.Fatalf("accepted an IPv6 address beside a primary that is not IPv4: %+v", n)
	}
	for _, a := range []struct {
		ip    netip.Addr
		cidrs []netip.Prefix
	}{{n.HostIP, policy.NodeCIDRs}, {n.PodIP, policy.PodCIDRs}, {n.ServiceIP, policy.ServiceCIDRs},
		{n.HostIPv6, policy.NodeCIDRs}, {n.PodIPv6, policy.PodCIDRs}, {n.ServiceIPv6, policy.ServiceCIDRs}} {
		ip := a.ip
		if !ip.IsValid() {
			continue
		}
		switch {
		case ip.IsUnspecified(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}), ip.Is4In6(), ip.Zone() != "":
			t.Fatalf("accepted address %s of %v", ip, reg)
		case ip.IsLoopback() && !slices.Contains(policy.Allow, ClassLoopback), ip.IsLinkLocalUnicast() && !slices.Contains(policy.Allow, ClassLinkLocal):
			t.Fatalf("accepted address %s of a class the policy %v refuses", ip, policy.Allow)
		case protocol.MetadataService(ip) != "":
			t.Fatalf("accepted the metadata service %s", ip)
		case len(a.cidrs) > 0 && !slices.ContainsFunc(a.cidrs, func(c netip.Prefix) bool { return c.Contains(ip) }):
			t.Fatalf("accepted address %s outside %v", ip, a.cidrs)
		}
	}
	for _, p := range []uint32{reg.GetIperf3Port(), reg.GetQperfPort(), reg.GetQperfDataPort(), reg.GetHttpPort(), reg.GetProbePort(), reg.GetGossipPort()} {
		if p > 65535 {
			t.Fatalf("accepted port %d", p)
		}
	}
	if n.Iperf3Port == 0 || n.QperfPort == 0 || n.QperfDataPort == 0 || n.QperfPort == n.QperfDataPort {
		t.Fatalf("ports in force %d, %d, %d", n.Iperf3Port, n.QperfPort, n.QperfDataPort)
	}
	texts := []string{reg.GetAgentVersion()}
	for _, tl := range reg.GetTools() {
		texts = append(texts, tl.GetVersion(), tl.GetError())
	}
	for _, s := range texts {
		if len(s) > maxTextLength || !utf8.ValidString(s) || slices.ContainsFunc([]rune(s), unicode.IsControl) {
			t.Fatalf("accepted text %q", s)
		}
	}
}
