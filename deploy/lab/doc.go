// Package lab builds a Kubernetes-like cluster out of Linux network
// namespaces, the way a CNI plugin wires real nodes, so that meshperf's
// agents and coordinator can be run and tested on one machine without
// Kubernetes.
//
// A lab is named by a short prefix. Everything it creates lives inside
// network namespaces whose names start with that prefix; nothing is created
// in the root namespace (no bridge, no veth, no route, no iptables rule), and
// the lab has no link to the root namespace at all, so lab traffic can never
// leave the machine.
//
// # Layout
//
// For a prefix P and N nodes (i = 1..N):
//
//	P-fabric   the "physical" network: bridge br0 with one port n<i> per node
//	           and one port ext for the external host
//	P-ext      the external host, outside the cluster: eth0 172.18.0.250/24
//	           (ExternalIP), a port of P-fabric's br0; loopback up, IPv6
//	           off, and no route but its connected 172.18.0.0/24 (no default
//	           route, none to pods or ClusterIPs)
//	P-node<i>  node i's host network namespace (node name "node-<i>"):
//	             eth0      172.18.0.(10+i)/24, a port of P-fabric's br0
//	             cni0      bridge, 10.244.i.1/24 (the pod gateway)
//	             vethpod0  the node end of the pod's veth, a port of cni0
//	             flannel.1 (vxlan mode only) VTEP, 10.244.i.0/32, VNI 1,
//	                       UDP 8472, MAC 0e:6c:61:62:00:<i in hex>
//	           net.ipv4.ip_forward=1, IPv6 off, a route 10.96.0.0/12 dev
//	           eth0 for the service range, and the iptables rules below
//	P-pod<i>   node i's pod: eth0 10.244.i.2/24, default via 10.244.i.1
//
// Cross-node pod routes are flannel's: in host-gw mode node i has
// "10.244.j.0/24 via 172.18.0.(10+j) dev eth0" for every other node j; in
// vxlan mode it has "10.244.j.0/24 via 10.244.j.0 dev flannel.1 onlink", a
// permanent neighbour 10.244.j.0 -> MAC_j and a static FDB entry MAC_j ->
// 172.18.0.(10+j). In vxlan mode cni0, vethpod0 and the pod's eth0 have MTU
// 1450, as flannel sets them; in host-gw mode every MTU is 1500.
//
// Services are kube-proxy's iptables recipe: node j's pod has the ClusterIP
// 10.96.0.(10+j), and every node DNATs every ClusterIP to its pod for TCP and
// UDP on all ports (nat PREROUTING for pod traffic, nat OUTPUT for the node's
// own traffic). ICMP is not DNATed, so pinging a ClusterIP fails, as it does
// with kube-proxy. Connections from outside the pod network that were DNATed
// are masqueraded (so host -> ClusterIP in vxlan mode goes through the
// overlay both ways), and so is a pod reaching itself through its ClusterIP
// (hairpin).
//
// Pod egress is masqueraded as flannel and most CNIs do it: node i's nat
// POSTROUTING jumps, for sources in its pod CIDR, to a chain MESHLAB-EGRESS
// that RETURNs for destinations in the cluster CIDR 10.244.0.0/16, the
// service CIDR 10.96.0.0/12 and every node's host IP, and MASQUERADEs the
// rest to 172.18.0.(10+i). So pods reach the external host, which sees
// their node IP and needs no route to pods, while every path inside the
// cluster (pod -> pod, pod -> ClusterIP, pod -> node, and the node's own
// traffic) keeps the source it has without the chain. The chain comes after
// the masquerades above, so the hairpin keeps its own. The external host
// reaches the node IPs directly, and no pod or ClusterIP.
//
// # IP families
//
// Config.IPFamily is FamilyIPv4 (the default: the layout above, IPv6 off),
// FamilyDual or FamilyIPv6. With IPv6 every namespace has IPv6 on with
// duplicate address detection and router solicitations off (addresses are
// usable at once), and each node gets ULAs beside (dual) or instead of
// (IPv6-only) the IPv4 ones: host fd00:18::<10+i>/64, cni0
// fd00:10:244:<i>::1/64, pod fd00:10:244:<i>::2 (default route via cni0),
// ClusterIP fd00:10:96::<10+i> (route fd00:10:96::/112 dev eth0), the
// external host fd00:18::250; the same routes per mode (host-gw via the
// peer's IPv6 host address; vxlan via the VTEP fd00:10:244:<j>::fe on
// flannel.1, whose underlay stays IPv4 in dual and is IPv6, MTU 1430, in
// IPv6-only), and the same nat and filter rules with ip6tables. In
// IPv6-only the Node fields HostIP, PodIP and ServiceIP hold the IPv6
// addresses.
//
// With Config.DropCrossNodePod every node drops, in its filter FORWARD
// chain, new connections from its pod CIDR to every other node's pod CIDR:
// like a CNI whose routes are missing, pod -> pod and pod -> ClusterIP across
// nodes fail, while host -> host, host -> pod and host -> ClusterIP keep
// working, and so does everything to and from the external host.
//
// Where the kernel has br_netfilter, nodes set
// net.bridge.bridge-nf-call-iptables=1, as Kubernetes requires, so bridged
// pod traffic is DNATed on cni0; the pod's bridge port is in hairpin
// mode, as the CNI bridge plugin sets it, so a pod reaches itself through its
// own ClusterIP.
//
// # Lifetime
//
// Describe computes the layout without touching the system. Up removes
// whatever exists under the prefix (a lab left by a crash never blocks a new
// one), checks the kernel features it needs, and builds the lab; if it fails
// it removes what it built. Down kills every process running in one of the
// lab's namespaces (a namespace with a process in it outlives its name) and
// deletes the namespaces (found by name: P-fabric, P-ext, P-node<N>,
// P-pod<N>); it is idempotent. Status reports what exists.
//
// Every external command (ip, bridge, iptables, iptables-restore, sysctl,
// nsenter) is run with an argv list, never through a shell, and with a
// timeout (CommandTimeout). Up wires up to 8 nodes at a time. All of this
// needs root. On a 2-CPU machine a 3-node lab comes up in about 0.5 s
// (host-gw) to 0.8 s (vxlan), 16 vxlan nodes in about 5 s; Down takes
// 30-150 ms.
package lab
