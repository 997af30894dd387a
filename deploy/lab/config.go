package lab

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
)

// Mode is how pod traffic crosses nodes, named after flannel's backends.
type Mode string

const (
	// ModeHostGW routes each node's pod CIDR via that node's host IP, as
	// flannel's host-gw backend does. Every MTU is 1500.
	ModeHostGW Mode = "host-gw"
	// ModeVXLAN carries pod traffic in a VXLAN overlay (device flannel.1,
	// VNI 1, UDP port 8472, static FDB and neighbours), as flannel's vxlan
	// backend does. Pod and cni0 MTUs are 1450.
	ModeVXLAN Mode = "vxlan"
)

// Modes lists the supported modes, in the order they are documented.
var Modes = []Mode{ModeHostGW, ModeVXLAN}

// Family is the lab's IP stack: which address families its hosts, pods and
// ClusterIPs have.
type Family string

const (
	// FamilyIPv4 gives every host, pod and ClusterIP an IPv4 address only
	// (IPv6 is turned off in every namespace), the default.
	FamilyIPv4 Family = "ipv4"
	// FamilyIPv6 gives them IPv6 (ULA) addresses only; in vxlan mode the
	// overlay runs over the IPv6 fabric.
	FamilyIPv6 Family = "ipv6"
	// FamilyDual gives them both; in vxlan mode the IPv6 pod traffic rides
	// the overlay over the IPv4 fabric.
	FamilyDual Family = "dual"
)

// Families lists the supported families, in the order they are documented.
var Families = []Family{FamilyIPv4, FamilyIPv6, FamilyDual}

// HasIPv4 reports whether f gives addresses of IPv4.
func (f Family) HasIPv4() bool { return f == FamilyIPv4 || f == FamilyDual || f == "" }

// HasIPv6 reports whether f gives addresses of IPv6.
func (f Family) HasIPv6() bool { return f == FamilyIPv6 || f == FamilyDual }

// Limits and defaults of Config.
const (
	// DefaultNodes is the node count used when Config.Nodes is zero.
	DefaultNodes = 3
	// MinNodes and MaxNodes bound Config.Nodes.
	MinNodes, MaxNodes = 2, 16 //nolint:revive // exported: one bound, documented once
	// MaxPrefixLen is the longest accepted Config.Prefix, in characters.
	MaxPrefixLen = 12
)

// Addresses and names shared by every lab.
var (
	// FabricSubnet holds the node (host) IPs: node i is 172.18.0.(10+i).
	FabricSubnet = netip.MustParsePrefix("172.18.0.0/24")
	// ClusterCIDR holds the pod CIDRs: node i's is 10.244.i.0/24.
	ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	// ServiceCIDR holds the ClusterIPs: node i's pod has 10.96.0.(10+i).
	ServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")
	// ExternalIP is the address of the lab's external host (namespace
	// "<prefix>-ext") in FabricSubnet, 172.18.0.250: on the nodes' network
	// but outside the cluster (no node, pod or ClusterIP), like a load
	// balancer or a machine of another cluster. It is above every node IP
	// (at most 172.18.0.(10+MaxNodes)).
	ExternalIP = netip.MustParseAddr("172.18.0.250")

	// FabricSubnet6 holds the node IPv6 addresses: node i's is
	// fd00:18::<10+i> (the decimal digits read as hex: node 1 is fd00:18::11).
	FabricSubnet6 = netip.MustParsePrefix("fd00:18::/64")
	// ClusterCIDR6 holds the IPv6 pod CIDRs: node i's is fd00:10:244:<i>::/64
	// (i in hex).
	ClusterCIDR6 = netip.MustParsePrefix("fd00:10:244::/56")
	// ServiceCIDR6 holds the IPv6 ClusterIPs: node i's pod has
	// fd00:10:96::<10+i>.
	ServiceCIDR6 = netip.MustParsePrefix("fd00:10:96::/112")
	// ExternalIPv6 is the external host's IPv6 address, fd00:18::250.
	ExternalIPv6 = netip.MustParseAddr("fd00:18::250")
)

// Interface names and overlay parameters.
const (
	// HostIface is the node's interface on the fabric, in the node namespace.
	HostIface = "eth0"
	// PodIface is the pod's interface, in the pod namespace.
	PodIface = "eth0"
	// BridgeIface is the node's pod bridge (the pod gateway).
	BridgeIface = "cni0"
	// PodPeerIface is the node end of the pod's veth, a port of BridgeIface.
	PodPeerIface = "vethpod0"
	// VXLANIface is the VTEP in vxlan mode.
	VXLANIface = "flannel.1"
	// VXLANID is the VXLAN network identifier.
	VXLANID = 1
	// VXLANPort is the VXLAN UDP destination port (flannel's default).
	VXLANPort = 8472
	// VXLANMTU is the MTU of flannel.1, cni0 and pod interfaces in vxlan mode,
	// in bytes: 1500 minus the 50 bytes of VXLAN encapsulation.
	VXLANMTU = 1450
	// VXLANMTU6 is VXLANMTU over an IPv6 fabric (FamilyIPv6), in bytes:
	// 1500 minus the 70 bytes of VXLAN encapsulation in IPv6.
	VXLANMTU6 = 1430
	// EthernetMTU is every other MTU, in bytes.
	EthernetMTU = 1500
	// ExternalIface is the external host's interface, in its namespace, a
	// veth whose peer ExternalFabricPort is a port of the fabric bridge.
	ExternalIface = "eth0"
	// ExternalFabricPort is the fabric namespace's end of the external
	// host's link, a port of br0 (node i's is "n<i>").
	ExternalFabricPort = "ext"
	// NetNSDir is where named network namespaces live (as with `ip netns`).
	NetNSDir = "/run/netns"
)

// Errors returned by this package, wrapped; match them with errors.Is.
var (
	// ErrInvalidConfig means a Config field (or a prefix) is out of range;
	// the message names the field and its value.
	ErrInvalidConfig = errors.New("invalid lab config")
	// ErrUnsupported means a tool or a kernel feature the lab needs is
	// missing; the message says which.
	ErrUnsupported = errors.New("not supported on this machine")
)

// Config says which lab to build. The zero value of every field but Prefix
// is usable.
type Config struct {
	// Prefix names the lab: every network namespace it creates is named
	// "<Prefix>-...". 1 to MaxPrefixLen characters from [a-z0-9]; required.
	// Two labs with different prefixes never touch each other.
	Prefix string
	// Nodes is the number of nodes, MinNodes..MaxNodes; 0 means DefaultNodes.
	Nodes int
	// Mode is the cross-node pod network; "" means ModeHostGW.
	Mode Mode
	// DropCrossNodePod installs, in every node's filter FORWARD chain, a DROP
	// of new connections (conntrack state NEW) from the node's pod CIDR to
	// every other node's pod CIDR, as if the CNI's routes were missing:
	// pod -> pod and pod -> ClusterIP across nodes fail; host -> host,
	// host -> pod, host -> ClusterIP and same-node traffic work (replies to
	// a node's connections are not NEW, also when vxlan mode sources them
	// from the node's VTEP address inside its pod CIDR).
	DropCrossNodePod bool
	// IPFamily is the IP stack of hosts, pods and ClusterIPs; "" means
	// FamilyIPv4. IPv6 addresses are ULAs (fd00::/8) inside the lab's
	// namespaces, with duplicate address detection off so they are usable
	// at once; ClusterIPs are DNATed with ip6tables.
	IPFamily Family
	// Logger receives a debug line per command and an info line per phase;
	// nil means discard.
	Logger *slog.Logger
}

// Lab is a built (or described) lab: its config with defaults applied, and
// its nodes.
type Lab struct {
	Config
	// FabricNetNS is the name of the namespace holding the fabric bridge.
	FabricNetNS string
	// FabricNetNSPath is its path, NetNSDir/FabricNetNS.
	FabricNetNSPath string
	// Nodes are the nodes, Nodes[i-1] being node i.
	Nodes []Node
	// External is the host outside the cluster, on the fabric.
	External External
}

// External is the lab's host outside the cluster: a network namespace
// attached to the fabric bridge with ExternalIP, loopback up, and only its
// connected route (FabricSubnet): no default route, no route to pod CIDRs
// or ClusterIPs. It reaches the nodes' host IPs directly; pods reach it
// because their nodes masquerade pod egress to the node IP, as flannel and
// most CNIs do. It stands for an external target: a LoadBalancer IP, an
// ingress host, a node of another cluster.
type External struct {
	// NetNS is the name of its network namespace, "<prefix>-ext".
	NetNS string
	// NetNSPath is NetNSDir/NetNS, for nsenter --net.
	NetNSPath string
	// IP is its address on ExternalIface: ExternalIP, or ExternalIPv6 in
	// FamilyIPv6.
	IP netip.Addr
	// IPv6 is its IPv6 address, ExternalIPv6, in FamilyIPv6 and
	// FamilyDual; the zero Addr in FamilyIPv4.
	IPv6 netip.Addr
}

// Command returns the argv that runs argv in the external host's namespace.
func (e External) Command(argv ...string) []string { return NSExec(e.NetNSPath, argv...) }

// Node is one node of a lab: a host network namespace and one pod.
type Node struct {
	// Index is the node number, 1..Config.Nodes.
	Index int
	// Name is the Kubernetes-like node name the agent registers with,
	// "node-<Index>".
	Name string
	// HostNetNS is the name of the node's host network namespace,
	// "<prefix>-node<Index>".
	HostNetNS string
	// HostNetNSPath is NetNSDir/HostNetNS, for nsenter --net.
	HostNetNSPath string
	// HostIP is the node IP on HostIface, 172.18.0.(10+Index), in
	// FabricSubnet.
	HostIP netip.Addr
	// PodNetNS is the name of the pod's network namespace,
	// "<prefix>-pod<Index>".
	PodNetNS string
	// PodNetNSPath is NetNSDir/PodNetNS, for nsenter --net.
	PodNetNSPath string
	// PodCIDR is the node's pod range, 10.244.Index.0/24.
	PodCIDR netip.Prefix
	// PodGateway is BridgeIface's address, 10.244.Index.1, the pod's
	// default gateway.
	PodGateway netip.Addr
	// PodIP is the pod's address on PodIface, 10.244.Index.2.
	PodIP netip.Addr
	// ServiceIP is the ClusterIP-like VIP of the pod, 10.96.0.(10+Index);
	// TCP and UDP to it, any port, reach PodIP from every node and pod.
	ServiceIP netip.Addr
	// VTEPIP is the address of VXLANIface, 10.244.Index.0; only set in
	// vxlan mode.
	VTEPIP netip.Addr
	// VTEPMAC is the MAC address of VXLANIface, 0e:6c:61:62:00:<Index>;
	// only set in vxlan mode.
	VTEPMAC net.HardwareAddr

	// The IPv4 fields above (HostIP, PodCIDR, PodGateway, PodIP, ServiceIP,
	// VTEPIP) hold the node's primary addresses: IPv4 in FamilyIPv4 and
	// FamilyDual, the IPv6 ones below in FamilyIPv6 (an IPv6-only cluster).
	// The IPv6 fields are set in FamilyIPv6 and FamilyDual only.

	// HostIPv6 is the node's IPv6 address on HostIface, in FabricSubnet6.
	HostIPv6 netip.Addr
	// PodCIDRv6 is the node's IPv6 pod range, fd00:10:244:<Index>::/64.
	PodCIDRv6 netip.Prefix
	// PodGatewayV6 is BridgeIface's IPv6 address, PodCIDRv6's ::1.
	PodGatewayV6 netip.Addr
	// PodIPv6 is the pod's IPv6 address, PodCIDRv6's ::2.
	PodIPv6 netip.Addr
	// ServiceIPv6 is the pod's IPv6 ClusterIP, fd00:10:96::<10+Index>.
	ServiceIPv6 netip.Addr
	// VTEPIPv6 is VXLANIface's IPv6 address, PodCIDRv6's ::fe (not ::0,
	// the subnet-router anycast address); only set in vxlan mode.
	VTEPIPv6 netip.Addr
}

// stack is one family's addresses of a node, as the builder wires them.
type stack struct {
	v6                                bool
	host, gateway, pod, service, vtep netip.Addr
	podCIDR                           netip.Prefix
}

// stacks returns the node's address families: IPv4 first, then IPv6.
func (n Node) stacks(f Family) []stack {
	var out []stack
	if f.HasIPv4() {
		out = append(out, stack{false, n.HostIP, n.PodGateway, n.PodIP, n.ServiceIP, n.VTEPIP, n.PodCIDR})
	}
	if f.HasIPv6() {
		out = append(out, stack{true, n.HostIPv6, n.PodGatewayV6, n.PodIPv6, n.ServiceIPv6, n.VTEPIPv6, n.PodCIDRv6})
	}
	return out
}

// HostIPs returns the node's host addresses, IPv4 first: one per family.
func (n Node) HostIPs() []netip.Addr { return both(n.HostIP, n.HostIPv6) }

// PodIPs returns the pod's addresses, IPv4 first: one per family.
func (n Node) PodIPs() []netip.Addr { return both(n.PodIP, n.PodIPv6) }

// ServiceIPs returns the pod's ClusterIPs, IPv4 first: one per family.
func (n Node) ServiceIPs() []netip.Addr { return both(n.ServiceIP, n.ServiceIPv6) }

// both returns the valid ones of primary and v6, without a duplicate (in
// FamilyIPv6 the primary is the IPv6 address).
func both(primary, v6 netip.Addr) []netip.Addr {
	var out []netip.Addr
	if primary.IsValid() {
		out = append(out, primary)
	}
	if v6.IsValid() && v6 != primary {
		out = append(out, v6)
	}
	return out
}

// ControlPlane returns node 1, in whose host namespace the coordinator runs,
// as on a control-plane node. It panics on a Lab with no nodes, which
// Describe and Up never return.
func (l *Lab) ControlPlane() Node { return l.Nodes[0] }

// Node returns the node with the given Name ("node-2") and whether it exists.
func (l *Lab) Node(name string) (Node, bool) {
	for _, n := range l.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// HostCommand returns the argv that runs argv in the node's host namespace.
func (n Node) HostCommand(argv ...string) []string { return NSExec(n.HostNetNSPath, argv...) }

// PodCommand returns the argv that runs argv in the node's pod namespace.
func (n Node) PodCommand(argv ...string) []string { return NSExec(n.PodNetNSPath, argv...) }

// NSExec returns the argv that runs argv inside the network namespace at
// nsPath (a NetNSDir entry or /proc/PID/ns/net) with util-linux nsenter:
// ["nsenter", "--net=" + nsPath, "--", argv...]. Only the network namespace
// changes; the mount namespace, and so /sys, stay the caller's.
func NSExec(nsPath string, argv ...string) []string {
	out := make([]string, 0, len(argv)+3)
	out = append(out, "nsenter", "--net="+nsPath, "--")
	return append(out, argv...)
}

var prefixRE = regexp.MustCompile(`^[a-z0-9]+$`)

// ValidatePrefix reports whether prefix is a valid Config.Prefix; the error
// wraps ErrInvalidConfig.
func ValidatePrefix(prefix string) error {
	if len(prefix) == 0 || len(prefix) > MaxPrefixLen || !prefixRE.MatchString(prefix) {
		return fmt.Errorf("%w: Prefix %q: want 1 to %d characters from [a-z0-9]", ErrInvalidConfig, prefix, MaxPrefixLen)
	}
	return nil
}

// withDefaults validates cfg and fills in its zero fields.
func (cfg Config) withDefaults() (Config, error) {
	if err := ValidatePrefix(cfg.Prefix); err != nil {
		return cfg, err
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = DefaultNodes
	}
	if cfg.Nodes < MinNodes || cfg.Nodes > MaxNodes {
		return cfg, fmt.Errorf("%w: Nodes %d: want %d to %d", ErrInvalidConfig, cfg.Nodes, MinNodes, MaxNodes)
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeHostGW
	}
	if cfg.Mode != ModeHostGW && cfg.Mode != ModeVXLAN {
		return cfg, fmt.Errorf("%w: Mode %q: want %q or %q", ErrInvalidConfig, cfg.Mode, ModeHostGW, ModeVXLAN)
	}
	if cfg.IPFamily == "" {
		cfg.IPFamily = FamilyIPv4
	}
	if !cfg.IPFamily.HasIPv4() && !cfg.IPFamily.HasIPv6() {
		return cfg, fmt.Errorf("%w: IPFamily %q: want %q, %q or %q", ErrInvalidConfig, cfg.IPFamily, FamilyIPv4, FamilyIPv6, FamilyDual)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// Describe validates cfg and returns the lab it describes, defaults applied,
// without touching the system. The error wraps ErrInvalidConfig.
func Describe(cfg Config) (*Lab, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Lab{
		Config:          cfg,
		FabricNetNS:     cfg.Prefix + "-fabric",
		FabricNetNSPath: nsPath(cfg.Prefix + "-fabric"),
		Nodes:           make([]Node, cfg.Nodes),
		External: External{
			NetNS:     cfg.Prefix + "-ext",
			NetNSPath: nsPath(cfg.Prefix + "-ext"),
			IP:        ExternalIP,
		},
	}
	for i := 1; i <= cfg.Nodes; i++ {
		b := byte(i)
		n := Node{
			Index:      i,
			Name:       fmt.Sprintf("node-%d", i),
			HostNetNS:  fmt.Sprintf("%s-node%d", cfg.Prefix, i),
			PodNetNS:   fmt.Sprintf("%s-pod%d", cfg.Prefix, i),
			HostIP:     netip.AddrFrom4([4]byte{172, 18, 0, 10 + b}),
			PodCIDR:    netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, b, 0}), 24),
			PodGateway: netip.AddrFrom4([4]byte{10, 244, b, 1}),
			PodIP:      netip.AddrFrom4([4]byte{10, 244, b, 2}),
			ServiceIP:  netip.AddrFrom4([4]byte{10, 96, 0, 10 + b}),
		}
		n.HostNetNSPath, n.PodNetNSPath = nsPath(n.HostNetNS), nsPath(n.PodNetNS)
		if cfg.Mode == ModeVXLAN {
			n.VTEPIP = netip.AddrFrom4([4]byte{10, 244, b, 0})
			// Locally administered unicast ("lab" in ASCII), unique per node.
			n.VTEPMAC = net.HardwareAddr{0x0e, 0x6c, 0x61, 0x62, 0x00, b}
		}
		if cfg.IPFamily.HasIPv6() {
			n.HostIPv6 = netip.MustParseAddr(fmt.Sprintf("fd00:18::%d", 10+i))
			n.PodCIDRv6 = netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%x::/64", i))
			n.PodGatewayV6 = netip.MustParseAddr(fmt.Sprintf("fd00:10:244:%x::1", i))
			n.PodIPv6 = netip.MustParseAddr(fmt.Sprintf("fd00:10:244:%x::2", i))
			n.ServiceIPv6 = netip.MustParseAddr(fmt.Sprintf("fd00:10:96::%d", 10+i))
			if cfg.Mode == ModeVXLAN {
				n.VTEPIPv6 = netip.MustParseAddr(fmt.Sprintf("fd00:10:244:%x::fe", i))
			}
		}
		if !cfg.IPFamily.HasIPv4() {
			n.HostIP, n.PodCIDR, n.PodGateway, n.PodIP, n.ServiceIP, n.VTEPIP =
				n.HostIPv6, n.PodCIDRv6, n.PodGatewayV6, n.PodIPv6, n.ServiceIPv6, n.VTEPIPv6
		}
		l.Nodes[i-1] = n
	}
	if cfg.IPFamily.HasIPv6() {
		l.External.IPv6 = ExternalIPv6
		if !cfg.IPFamily.HasIPv4() {
			l.External.IP = ExternalIPv6
		}
	}
	return l, nil
}

// podMTU is the MTU of cni0 and the pod's veth in mode m and family f.
func podMTU(m Mode, f Family) int {
	switch {
	case m == ModeVXLAN && !f.HasIPv4():
		return VXLANMTU6
	case m == ModeVXLAN:
		return VXLANMTU
	}
	return EthernetMTU
}

func nsPath(name string) string { return NetNSDir + "/" + name }
