package registry

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// register is a valid Register of node-1 with the given host, pod and
// service IPs ("" for none).
func register(host, pod, service string) *agentv1.Register {
	reg := &agentv1.Register{NodeName: "node-1", ProtocolVersion: protocol.Version, ServiceIp: service}
	if host != "" {
		reg.Addresses = append(reg.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_HOST, Ip: host})
	}
	if pod != "" {
		reg.Addresses = append(reg.Addresses, &measurev1.NetworkAddress{Network: measurev1.Network_NETWORK_POD, Ip: pod})
	}
	return reg
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// errNotInCluster is fakeCluster's error for a node it does not know.
var errNotInCluster = errors.New("not in the cluster")

// fakeCluster is a ClusterAddresses of fixed Node and pod endpoint
// addresses.
type fakeCluster struct{ nodes, pods map[string][]netip.Addr }

func (f fakeCluster) NodeIPs(_ context.Context, node string) ([]netip.Addr, error) {
	ips, ok := f.nodes[node]
	if !ok {
		return nil, fmt.Errorf("no Node %q: %w", node, errNotInCluster)
	}
	return ips, nil
}

func (f fakeCluster) EndpointPodIPs(_ context.Context, node string) ([]netip.Addr, error) {
	ips, ok := f.pods[node]
	if !ok {
		return nil, fmt.Errorf("no pod endpoint on node %q: %w", node, errNotInCluster)
	}
	return ips, nil
}

// TestValidateRegisterPolicy: each refused address class, each CIDR list
// and each port field is refused with the field and the value named; what
// the policy allows passes.
func TestValidateRegisterPolicy(t *testing.T) {
	strict := &AddressPolicy{}
	loopback := &AddressPolicy{Allow: []AddressClass{ClassLoopback}}
	cidrs := &AddressPolicy{NodeCIDRs: prefixes("10.0.0.0/16"), PodCIDRs: prefixes("10.244.0.0/16", "fd00:244::/48"), ServiceCIDRs: prefixes("10.96.0.0/12")}
	withPorts := func(reg *agentv1.Register, edit func(*agentv1.Register)) *agentv1.Register { edit(reg); return reg }
	tests := []struct {
		name    string
		policy  *AddressPolicy
		reg     *agentv1.Register
		wantErr []string // all in the error; none: accepted
	}{
		{"metadata service as host IP", strict, register("169.254.169.254", "", ""), []string{"addresses[0].ip (host) 169.254.169.254", "link-local"}},
		{"IPv6 link-local pod IP", strict, register("10.0.0.1", "fe80::1", ""), []string{"addresses[1].ip (pod) fe80::1", "link-local"}},
		{"loopback host IP", strict, register("127.0.0.1", "", ""), []string{"addresses[0].ip (host) 127.0.0.1", "loopback", "--allow-addresses loopback"}},
		{"IPv6 loopback service IP", strict, register("10.0.0.1", "", "::1"), []string{"service_ip ::1", "loopback"}},
		{"loopback allowed", loopback, register("127.0.0.1", "127.0.0.2", "127.0.0.3"), nil},
		{"link-local not allowed by loopback", loopback, register("169.254.169.254", "", ""), []string{"169.254.169.254", "link-local"}},
		{"link-local allowed", &AddressPolicy{Allow: []AddressClass{ClassLinkLocal}}, register("169.254.1.1", "", ""), nil},
		{"AWS metadata over IPv6", permissive, register("fd00:ec2::254", "", ""), []string{"fd00:ec2::254", "metadata service of AWS"}},
		{"multicast", permissive, register("224.0.0.1", "", ""), []string{"addresses[0].ip", "multicast"}},
		{"unspecified", permissive, register("0.0.0.0", "", ""), []string{"addresses[0].ip", "unspecified"}},
		{"broadcast service IP", permissive, register("10.0.0.1", "", "255.255.255.255"), []string{"service_ip", "broadcast"}},
		{"inside every CIDR", cidrs, register("10.0.3.4", "fd00:244::5", "10.96.0.10"), nil},
		{"host IP outside node_cidrs", cidrs, register("10.1.0.1", "", ""), []string{"addresses[0].ip (host) 10.1.0.1 is outside node_cidrs (10.0.0.0/16)"}},
		{"pod IP outside pod_cidrs", cidrs, register("10.0.0.1", "10.245.0.1", ""), []string{"addresses[1].ip (pod) 10.245.0.1 is outside pod_cidrs (10.244.0.0/16, fd00:244::/48)"}},
		{"service IP outside service_cidrs", cidrs, register("10.0.0.1", "", "10.112.0.1"), []string{"service_ip 10.112.0.1 is outside service_cidrs (10.96.0.0/12)"}},
		{"port of 99999", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.Iperf3Port = 99999 }), []string{"iperf3_port 99999 is not a port"}},
		{"qperf port of 65536", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.QperfPort = 65536 }), []string{"qperf_port 65536"}},
		{"qperf data port of 70000", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.QperfDataPort = 70000 }), []string{"qperf_data_port 70000"}},
		{"http port of 99999", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.HttpPort = 99999 }), []string{"http_port 99999"}},
		{"probe port of 99999", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.ProbePort = 99999 }), []string{"probe_port 99999"}},
		{"qperf ports equal", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.QperfPort, r.QperfDataPort = 7000, 7000 }),
			[]string{"qperf_port and qperf_data_port are both 7000"}},
		// A Service port per server (coordinator/kube): two servers on
		// one port cannot both be served, the default ports included.
		{"http port on iperf3's default", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.HttpPort = 5201 }),
			[]string{"iperf3_port and http_port are both 5201"}},
		{"probe port on the http port", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) { r.HttpPort, r.ProbePort = 8080, 8080 }),
			[]string{"http_port and probe_port are both 8080"}},
		{"ports in range", permissive, withPorts(register("10.0.0.1", "", ""), func(r *agentv1.Register) {
			r.Iperf3Port, r.QperfPort, r.QperfDataPort, r.HttpPort, r.ProbePort, r.GossipPort = 1, 65535, 2, 3, 4, 5
		}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := validateRegister(tt.reg, tt.policy)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if n.Iperf3Port == 0 || n.QperfPort == 0 || n.QperfDataPort == 0 {
					t.Errorf("ports in force %d, %d, %d: want none 0", n.Iperf3Port, n.QperfPort, n.QperfDataPort)
				}
				return
			}
			if !errors.Is(err, ErrBadRegistration) {
				t.Fatalf("error %v, want ErrBadRegistration", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestDefaultServerPorts: 0 means the default ports, which Endpoints
// carry in force.
func TestDefaultServerPorts(t *testing.T) {
	n, err := validateRegister(register("10.0.0.1", "", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := nodeEndpoint(n, nil, "")
	if ep.GetIperf3Port() != 5201 || ep.GetQperfPort() != 19765 || ep.GetQperfDataPort() != 19766 || !n.defaultPorts() {
		t.Errorf("endpoint %v: want ports 5201, 19765, 19766", ep)
	}
}

// TestClusterCheck: with a cluster, the host IP must be one of the Node's
// addresses and the pod IP one of its pod endpoint's.
func TestClusterCheck(t *testing.T) {
	cluster := fakeCluster{
		nodes: map[string][]netip.Addr{"node-1": {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("203.0.113.1")}},
		pods:  map[string][]netip.Addr{"node-1": {netip.MustParseAddr("10.244.1.2")}},
	}
	p := &AddressPolicy{Cluster: cluster}
	tests := []struct {
		name      string
		node      string
		host, pod string
		wantErr   string
	}{
		{"InternalIP and pod IP", "node-1", "10.0.0.1", "10.244.1.2", ""},
		{"ExternalIP, no pod", "node-1", "203.0.113.1", "", ""},
		{"host IP not the Node's", "node-1", "10.0.0.9", "10.244.1.2", "host IP 10.0.0.9 is not an address of the Node object \"node-1\""},
		{"pod IP not the endpoint's", "node-1", "10.0.0.1", "10.244.1.9", "pod IP 10.244.1.9 is not an address of node \"node-1\"'s pod endpoint"},
		{"no such Node", "node-2", "10.0.0.1", "", "not in the cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node{Name: tt.node, HostIP: netip.MustParseAddr(tt.host)}
			if tt.pod != "" {
				n.PodIP = netip.MustParseAddr(tt.pod)
			}
			err := p.checkCluster(t.Context(), n)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// TestAddressPolicyCheck: a CIDR with host bits or an unknown class is
// refused, naming the entry.
func TestAddressPolicyCheck(t *testing.T) {
	tests := []struct {
		name    string
		p       AddressPolicy
		wantErr string
	}{
		{"fine", AddressPolicy{Allow: []AddressClass{ClassLoopback}, NodeCIDRs: prefixes("10.0.0.0/8")}, ""},
		{"host bits", AddressPolicy{PodCIDRs: prefixes("10.0.0.0/8", "10.244.1.0/16")}, "pod_cidrs[1]: 10.244.1.0/16 has host bits set; did you mean 10.244.0.0/16?"},
		{"mapped", AddressPolicy{ServiceCIDRs: prefixes("::ffff:10.0.0.0/104")}, "service_cidrs[0]: ::ffff:10.0.0.0/104 is IPv4-mapped"},
		{"unknown class", AddressPolicy{Allow: []AddressClass{"multicast"}}, `"multicast" cannot be allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Check()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// TestParseAddressClasses covers --allow-addresses.
func TestParseAddressClasses(t *testing.T) {
	tests := []struct {
		in      string
		want    []AddressClass
		wantErr string
	}{
		{"", nil, ""},
		{"loopback", []AddressClass{ClassLoopback}, ""},
		{"loopback, link-local,loopback", []AddressClass{ClassLoopback, ClassLinkLocal}, ""},
		{"multicast", nil, `"multicast" cannot be allowed`},
		{"lo", nil, `address class "lo": want loopback or link-local`},
	}
	for _, tt := range tests {
		got, err := ParseAddressClasses(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want one with %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%q: %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestCheckServerStarted: a ServerStarted must give the port the node
// registered for the tool, and qperf's data port.
func TestCheckServerStarted(t *testing.T) {
	n, err := validateRegister(&agentv1.Register{NodeName: "node-1", ProtocolVersion: protocol.Version, HttpPort: 8080, QperfPort: 7001,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "10.0.0.1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	noHTTP := n
	noHTTP.HTTPPort = 0
	iperf3, qperf, curl := measurev1.Tool_TOOL_IPERF3, measurev1.Tool_TOOL_QPERF, measurev1.Tool_TOOL_CURL
	tests := []struct {
		name    string
		n       Node
		tool    measurev1.Tool
		st      *agentv1.ServerStarted
		wantErr string
	}{
		{"iperf3 default", n, iperf3, &agentv1.ServerStarted{Port: 5201}, ""},
		{"iperf3 elsewhere", n, iperf3, &agentv1.ServerStarted{Port: 18081}, `node "node-1" answered ServerStarted for iperf3 with port 18081; it registered 5201`},
		{"iperf3 with a data port", n, iperf3, &agentv1.ServerStarted{Port: 5201, DataPort: 22}, "data_port 22"},
		{"qperf registered", n, qperf, &agentv1.ServerStarted{Port: 7001, DataPort: 19766}, ""},
		{"qperf default port, not registered", n, qperf, &agentv1.ServerStarted{Port: 19765, DataPort: 19766}, "qperf with port 19765; it registered 7001"},
		{"qperf data port", n, qperf, &agentv1.ServerStarted{Port: 7001, DataPort: 99999}, "data_port 99999; it registered 19766"},
		{"HTTP", n, curl, &agentv1.ServerStarted{Port: 8080}, ""},
		{"HTTP elsewhere", n, curl, &agentv1.ServerStarted{Port: 80}, "HTTP with port 80; it registered 8080"},
		{"HTTP not registered", noHTTP, curl, &agentv1.ServerStarted{Port: 8080}, "registered no http_port"},
		{"http_load", n, measurev1.Tool_TOOL_AB, &agentv1.ServerStarted{Port: 8080}, ""},
		{"http_load elsewhere", n, measurev1.Tool_TOOL_AB, &agentv1.ServerStarted{Port: 5201}, "HTTP with port 5201; it registered 8080"},
		{"http_load not registered", noHTTP, measurev1.Tool_TOOL_AB, &agentv1.ServerStarted{Port: 8080}, "registered no http_port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckServerStarted(tt.n, tt.tool, tt.st)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}
