package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// parallelism is how many nodes Up wires at the same time.
const parallelism = 8

// cleanupTimeout bounds the Down that Up runs after a failure, which must
// work even when ctx has ended.
const cleanupTimeout = 30 * time.Second

// Up builds the lab cfg describes and returns it. It first removes whatever
// exists under cfg.Prefix (as Down does), so a lab left by a crash never
// blocks it, then checks that the tools and kernel features it needs are
// there, then builds the namespaces, links, routes and iptables rules. If
// anything fails, Up removes what it built and returns the error: it wraps
// ErrInvalidConfig (bad cfg), ErrUnsupported (not root, a tool or a kernel
// feature missing, the message says which), ctx.Err(), or names the command
// that failed and what it printed.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	l, err := Describe(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkRoot(); err != nil {
		return nil, err
	}
	if err := checkPrograms(tools); err != nil {
		return nil, err
	}
	log := l.Logger
	start := time.Now()
	if err := Down(ctx, l.Prefix, log); err != nil {
		return nil, fmt.Errorf("lab %s up: remove the previous lab: %w", l.Prefix, err)
	}
	b := builder{lab: l, r: runner{log: log}}
	if err := b.build(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := Down(cctx, l.Prefix, log); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after the failure: %w", derr))
		}
		return nil, fmt.Errorf("lab %s up: %w", l.Prefix, err)
	}
	log.InfoContext(ctx, "lab up", "prefix", l.Prefix, "nodes", l.Config.Nodes, "mode", l.Mode, "ip_family", l.IPFamily,
		"drop_cross_node_pod", l.DropCrossNodePod, "external", l.External.IP, "elapsed", time.Since(start).Round(time.Millisecond))
	return l, nil
}

// builder runs the steps of Up.
type builder struct {
	lab *Lab
	r   runner
}

func (b builder) build(ctx context.Context) error {
	l, r := b.lab, b.r
	fab := l.FabricNetNS
	if err := r.ip(ctx, "", "netns", "add", fab); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if err := b.sysctl(ctx, l.FabricNetNSPath, false); err != nil {
		return err
	}
	if err := r.ip(ctx, fab, "link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := r.ip(ctx, fab, "link", "add", "br0", "type", "bridge"); err != nil {
		return unsupported(ctx, "Linux bridge (ip link add type bridge)", err)
	}
	if err := r.ip(ctx, fab, "link", "set", "br0", "up"); err != nil {
		return err
	}
	if err := b.probe(ctx); err != nil {
		return err
	}
	if err := b.external(ctx); err != nil {
		return err
	}
	// Nodes are independent of each other: wire them in parallel, then,
	// once every node exists, give each its routes to the others.
	if err := b.eachNode(ctx, b.node); err != nil {
		return err
	}
	return b.eachNode(ctx, func(ctx context.Context, n Node) error {
		if err := b.routes(ctx, n); err != nil {
			return err
		}
		return b.iptables(ctx, n)
	})
}

// eachNode runs f for every node, at most parallelism at a time, and
// returns the first error (naming the node); the others are then cancelled.
func (b builder) eachNode(ctx context.Context, f func(context.Context, Node) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for _, n := range b.lab.Nodes {
		g.Go(func() error {
			if err := f(ctx, n); err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// unsupported wraps err with ErrUnsupported naming feature, unless ctx ended
// (then the failure says nothing about the kernel).
func unsupported(ctx context.Context, feature string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: the kernel refused %s: %w", ErrUnsupported, feature, err)
}

// probe checks, inside the fabric namespace, the kernel features that may be
// missing: iptables nat (DNAT, conntrack, MASQUERADE) and, in vxlan mode,
// VXLAN devices. What a probe adds it removes.
func (b builder) probe(ctx context.Context) error {
	l, r := b.lab, b.r
	if err := b.probeNAT(ctx, "iptables", "192.0.2.1/32", "192.0.2.2"); err != nil {
		return err
	}
	if l.IPFamily.HasIPv6() {
		if err := b.probe6(ctx); err != nil {
			return err
		}
	}
	if l.Mode == ModeVXLAN {
		if err := r.ip(ctx, l.FabricNetNS, "link", "add", "vxprobe0", "type", "vxlan",
			"id", "4242", "dstport", strconv.Itoa(VXLANPort), "nolearning"); err != nil {
			return unsupported(ctx, "VXLAN devices (ip link add type vxlan)", err)
		}
		if err := r.ip(ctx, l.FabricNetNS, "link", "delete", "vxprobe0"); err != nil {
			return err
		}
	}
	return nil
}

// probe6 checks, inside the fabric namespace, ip6tables nat (DNAT and
// MASQUERADE), which an IPv6 lab's ClusterIPs need. What it adds it
// removes.
func (b builder) probe6(ctx context.Context) error {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return fmt.Errorf("%w: the kernel has no IPv6 (/proc/sys/net/ipv6 is missing)", ErrUnsupported)
	}
	return b.probeNAT(ctx, "ip6tables", "2001:db8::1/128", "2001:db8::2")
}

// probeNAT adds and removes, with tool (iptables or ip6tables) in the
// fabric namespace, a nat DNAT rule from the documentation prefix from to
// the address to and a MASQUERADE rule for DNATed connections. A rule the
// kernel refuses is ErrUnsupported (through unsupported).
func (b builder) probeNAT(ctx context.Context, tool, from, to string) error {
	ipt := func(args ...string) error {
		_, err := b.r.run(ctx, "", NSExec(b.lab.FabricNetNSPath, append([]string{tool, "-w", iptablesWait}, args...)...)...)
		return err
	}
	dnat := []string{"-t", "nat", "OUTPUT", "-d", from, "-p", "tcp", "-j", "DNAT", "--to-destination", to}
	masq := []string{"-t", "nat", "POSTROUTING", "-m", "conntrack", "--ctstate", "DNAT", "-j", "MASQUERADE"}
	for _, rule := range [][]string{dnat, masq} {
		add := append([]string{rule[0], rule[1], "-A"}, rule[2:]...)
		if err := ipt(add...); err != nil {
			return unsupported(ctx, tool+" nat ("+tool+" "+strings.Join(add, " ")+")", err)
		}
		del := append([]string{rule[0], rule[1], "-D"}, rule[2:]...)
		if err := ipt(del...); err != nil {
			return err
		}
	}
	return nil
}

// sysctl sets up the namespace at path. In FamilyIPv4, where the kernel
// has IPv6, IPv6 is turned off so no neighbour discovery or router
// solicitation adds noise to the measurements; with IPv6 addresses,
// duplicate address detection and router solicitations are turned off
// (addresses are usable at once, and no router is asked for). On a node
// (node true) IP forwarding is turned on in each family and, where the
// kernel has br_netfilter, bridged traffic goes through iptables (and
// ip6tables), as Kubernetes requires. Keys are probed in the caller's
// /proc/sys: the same kernel, so the same features.
func (b builder) sysctl(ctx context.Context, path string, node bool) error {
	var keys []string
	v6 := b.lab.IPFamily.HasIPv6()
	if node {
		keys = append(keys, "net.ipv4.ip_forward=1")
	}
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		if !v6 {
			keys = append(keys, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
		} else {
			keys = append(keys, "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0",
				"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
				"net.ipv6.conf.all.router_solicitations=0", "net.ipv6.conf.default.router_solicitations=0")
			if node {
				keys = append(keys, "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.default.forwarding=1")
			}
		}
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil && node {
		keys = append(keys, "net.bridge.bridge-nf-call-iptables=1")
		if v6 {
			keys = append(keys, "net.bridge.bridge-nf-call-ip6tables=1")
		}
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := b.r.run(ctx, "", NSExec(path, append([]string{"sysctl", "-q", "-w"}, keys...)...)...)
	return err
}

// external creates the external host's namespace and attaches it to the
// fabric bridge. It gets no route but the connected FabricSubnet: nothing
// inside or outside the lab is reachable from it but the fabric.
func (b builder) external(ctx context.Context) error {
	l, r := b.lab, b.r
	ext := l.External.NetNS
	if err := r.ip(ctx, "", "netns", "add", ext); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if err := b.sysctl(ctx, l.External.NetNSPath, false); err != nil {
		return err
	}
	steps := [][]string{
		{ext, "link", "set", "lo", "up"},
		// Created in the external namespace, peer straight into the fabric
		// namespace, as the nodes' links are.
		{ext, "link", "add", ExternalIface, "type", "veth", "peer", "name", ExternalFabricPort, "netns", l.FabricNetNS},
		{l.FabricNetNS, "link", "set", ExternalFabricPort, "master", "br0", "up"},
	}
	if l.IPFamily.HasIPv4() {
		steps = append(steps, []string{ext, "addr", "add", prefixOf(l.External.IP, FabricSubnet.Bits()), "dev", ExternalIface})
	}
	if l.IPFamily.HasIPv6() {
		steps = append(steps, []string{ext, "addr", "add", prefixOf(l.External.IPv6, FabricSubnet6.Bits()), "dev", ExternalIface, "nodad"})
	}
	steps = append(steps, []string{ext, "link", "set", ExternalIface, "up"})
	for _, s := range steps {
		if err := r.ip(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("external host: %w", err)
		}
	}
	return nil
}

// node creates node n's namespaces and wires its host and its pod.
func (b builder) node(ctx context.Context, n Node) error {
	l, r := b.lab, b.r
	host, pod := n.HostNetNS, n.PodNetNS
	mtu := strconv.Itoa(podMTU(l.Mode, l.IPFamily))
	port := "n" + strconv.Itoa(n.Index)
	steps := [][]string{
		{"", "netns", "add", host},
		{"", "netns", "add", pod},
	}
	for _, s := range steps {
		if err := r.ip(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
	}
	if err := b.sysctl(ctx, n.HostNetNSPath, true); err != nil {
		return err
	}
	if err := b.sysctl(ctx, n.PodNetNSPath, false); err != nil {
		return err
	}
	steps = [][]string{
		{host, "link", "set", "lo", "up"},
		{pod, "link", "set", "lo", "up"},
		// The fabric link: created in the node namespace, peer straight into
		// the fabric namespace, so it never exists in the root namespace.
		{host, "link", "add", HostIface, "type", "veth", "peer", "name", port, "netns", l.FabricNetNS},
		{l.FabricNetNS, "link", "set", port, "master", "br0", "up"},
		{host, "link", "set", HostIface, "up"},
		// The pod bridge and the pod's veth.
		{host, "link", "add", BridgeIface, "mtu", mtu, "type", "bridge"},
		{host, "link", "set", BridgeIface, "up"},
		{host, "link", "add", PodPeerIface, "mtu", mtu, "type", "veth", "peer", "name", PodIface, "netns", pod},
		{host, "link", "set", PodPeerIface, "master", BridgeIface, "up"},
		// Hairpin, as the CNI bridge plugin's hairpinMode sets it: with
		// br_netfilter on, a pod reaching itself through its ClusterIP is
		// DNATed on the bridge and must go back out the port it came in by.
		{host, "link", "set", PodPeerIface, "type", "bridge_slave", "hairpin", "on"},
		{pod, "link", "set", PodIface, "mtu", mtu, "up"},
	}
	if l.Mode == ModeVXLAN {
		// The overlay rides the primary family's fabric: IPv4, or IPv6 in
		// an IPv6-only lab.
		steps = append(steps,
			[]string{host, "link", "add", VXLANIface, "address", n.VTEPMAC.String(), "mtu", mtu,
				"type", "vxlan", "id", strconv.Itoa(VXLANID), "local", n.HostIP.String(), "dev", HostIface,
				"dstport", strconv.Itoa(VXLANPort), "nolearning"},
			[]string{host, "link", "set", VXLANIface, "up"},
		)
	}
	for _, st := range n.stacks(l.IPFamily) {
		fabric, service, nodad := FabricSubnet, ServiceCIDR, []string(nil)
		if st.v6 {
			fabric, service, nodad = FabricSubnet6, ServiceCIDR6, []string{"nodad"}
		}
		steps = append(steps,
			append([]string{host, "addr", "add", prefixOf(st.host, fabric.Bits()), "dev", HostIface}, nodad...),
			append([]string{host, "addr", "add", prefixOf(st.gateway, st.podCIDR.Bits()), "dev", BridgeIface}, nodad...),
			append([]string{pod, "addr", "add", prefixOf(st.pod, st.podCIDR.Bits()), "dev", PodIface}, nodad...),
			[]string{pod, "route", "add", "default", "via", st.gateway.String(), "dev", PodIface},
			// Nodes have no default route; without a route for the service
			// range the node's own route lookup fails before OUTPUT DNAT runs.
			[]string{host, "route", "add", service.String(), "dev", HostIface},
		)
		if l.Mode == ModeVXLAN {
			steps = append(steps, append([]string{host, "addr", "add", prefixOf(st.vtep, st.vtep.BitLen()), "dev", VXLANIface}, nodad...))
		}
	}
	for _, s := range steps {
		if err := r.ip(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// routes installs node n's routes to every other node's pod CIDRs, in each
// family.
func (b builder) routes(ctx context.Context, n Node) error {
	l, r := b.lab, b.r
	for _, p := range l.Nodes {
		if p.Index == n.Index {
			continue
		}
		if l.Mode == ModeVXLAN {
			if _, err := r.run(ctx, "", "bridge", "-n", n.HostNetNS, "fdb", "append", p.VTEPMAC.String(),
				"dev", VXLANIface, "dst", p.HostIP.String()); err != nil {
				return err
			}
		}
		ps := p.stacks(l.IPFamily)
		for _, st := range ps {
			if l.Mode == ModeHostGW {
				if err := r.ip(ctx, n.HostNetNS, "route", "add", st.podCIDR.String(), "via", st.host.String(), "dev", HostIface); err != nil {
					return err
				}
				continue
			}
			if err := r.ip(ctx, n.HostNetNS, "neigh", "add", st.vtep.String(), "lladdr", p.VTEPMAC.String(),
				"dev", VXLANIface, "nud", "permanent"); err != nil {
				return err
			}
			if err := r.ip(ctx, n.HostNetNS, "route", "add", st.podCIDR.String(), "via", st.vtep.String(),
				"dev", VXLANIface, "onlink"); err != nil {
				return err
			}
		}
	}
	return nil
}

// egressChain is the nat chain, in every node namespace, that masquerades
// the node's pod traffic leaving the cluster (flannel's FLANNEL-POSTRTG).
const egressChain = "MESHLAB-EGRESS"

// iptables loads node n's rules, per family in one iptables-restore (or
// ip6tables-restore): the ClusterIP DNATs, the masquerades, and
// DropCrossNodePod's DROPs.
func (b builder) iptables(ctx context.Context, n Node) error {
	for _, st := range n.stacks(b.lab.IPFamily) {
		tool := "iptables-restore"
		if st.v6 {
			tool = "ip6tables-restore"
		}
		rules := b.rules(n, st)
		_, err := b.r.run(ctx, rules, NSExec(n.HostNetNSPath, tool, "-w", iptablesWait, "--noflush")...)
		if err != nil {
			return fmt.Errorf("load %s rules:\n%s: %w", strings.TrimSuffix(tool, "-restore"), rules, err)
		}
	}
	return nil
}

// rules returns node n's iptables-restore input for the family of st.
func (b builder) rules(n Node, st stack) string {
	l := b.lab
	cluster, service, host := ClusterCIDR, ServiceCIDR, "/32"
	if st.v6 {
		cluster, service, host = ClusterCIDR6, ServiceCIDR6, "/128"
	}
	peer := func(p Node) stack {
		for _, s := range p.stacks(l.IPFamily) {
			if s.v6 == st.v6 {
				return s
			}
		}
		return stack{}
	}
	var sb strings.Builder
	sb.WriteString("*nat\n")
	for _, p := range l.Nodes {
		ps := peer(p)
		for _, chain := range []string{"PREROUTING", "OUTPUT"} {
			for _, proto := range []string{"tcp", "udp"} {
				fmt.Fprintf(&sb, "-A %s -d %s%s -p %s -j DNAT --to-destination %s\n", chain, ps.service, host, proto, ps.pod)
			}
		}
	}
	// Like kube-proxy's KUBE-MARK-MASQ for sources outside the cluster CIDR
	// (the node itself), and the hairpin case of a pod reaching itself.
	fmt.Fprintf(&sb, "-A POSTROUTING ! -s %s -m conntrack --ctstate DNAT -j MASQUERADE\n", cluster)
	fmt.Fprintf(&sb, "-A POSTROUTING -s %s%s -d %s%s -j MASQUERADE\n", st.pod, host, st.pod, host)
	// Pod egress, as flannel and most CNIs do it: traffic from the node's
	// pod CIDR leaving the cluster is masqueraded to the node IP, so an
	// external host (which has no route to pod CIDRs) sees the node. Pods,
	// ClusterIPs (DNATed to pods before POSTROUTING) and the nodes' host IPs
	// are inside the cluster and keep the pod IP as source, as they did
	// before; the chain comes after the rules above and only RETURNs or
	// MASQUERADEs, so it changes no path they cover.
	fmt.Fprintf(&sb, ":%s - [0:0]\n", egressChain)
	fmt.Fprintf(&sb, "-A POSTROUTING -s %s -j %s\n", st.podCIDR, egressChain)
	fmt.Fprintf(&sb, "-A %s -d %s -j RETURN\n", egressChain, cluster)
	fmt.Fprintf(&sb, "-A %s -d %s -j RETURN\n", egressChain, service)
	for _, p := range l.Nodes {
		fmt.Fprintf(&sb, "-A %s -d %s%s -j RETURN\n", egressChain, peer(p).host, host)
	}
	fmt.Fprintf(&sb, "-A %s -j MASQUERADE\n", egressChain)
	sb.WriteString("COMMIT\n")
	if l.DropCrossNodePod {
		sb.WriteString("*filter\n")
		for _, p := range l.Nodes {
			if p.Index != n.Index {
				fmt.Fprintf(&sb, "-A FORWARD -s %s -d %s -m conntrack --ctstate NEW -j DROP\n", st.podCIDR, peer(p).podCIDR)
			}
		}
		sb.WriteString("COMMIT\n")
	}
	return sb.String()
}

// prefixOf returns "a/bits", an interface address for ip addr add.
func prefixOf(a netip.Addr, bits int) string { return netip.PrefixFrom(a, bits).String() }
