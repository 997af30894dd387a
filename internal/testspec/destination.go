package testspec

import (
	"fmt"
	"slices"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Kind is what a test's destination is: a node of the mesh, or an
// external target of the coordinator's allowlist. The test's path decides
// it (KindOf); the wire's dst_node then names a node or a target.
type Kind uint8

const (
	// KindNode is a mesh node: the paths host-host, host-pod, pod-pod,
	// pod-service and host-service (and an unspecified or unknown path).
	KindNode Kind = iota
	// KindTarget is an external target: the paths host-external and
	// pod-external. Its name is no node's (the coordinator refuses a
	// target named like a node).
	KindTarget
)

// KindOf returns the kind of destination a test on path p goes to.
func KindOf(p measurev1.Path) Kind {
	if IsExternal(p) {
		return KindTarget
	}
	return KindNode
}

// String is "node" or "target" ("kind(N)" for another value).
func (k Kind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindTarget:
		return "target"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// InMesh reports whether a destination of kind k is a mesh node, so that
// a test to it is one of a node pair: node-pair statistics, the
// node-by-node matrix, the per-node series of the destination (role dst)
// and the localisation of node faults apply to it. A target is judged
// apart (per target and per source node's egress) and has no series of
// its own as a node.
func (k Kind) InMesh() bool { return k == KindNode }

// Baseline is the path another path's overhead is measured against for a
// destination of kind k: host->host for a node, host->external for a
// target (pod->external against it is the cost of leaving the cluster
// from a pod).
func (k Kind) Baseline() measurev1.Path {
	return Pick(Destination{kind: k}, measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_HOST_TO_EXTERNAL)
}

// SplitPaths splits paths, keeping their order, into those to a node
// (KindNode) and those to an external target (KindTarget); each is nil
// when it has none.
func SplitPaths(paths []measurev1.Path) (node, target []measurev1.Path) {
	for _, p := range paths {
		if KindOf(p) == KindTarget {
			target = append(target, p)
		} else {
			node = append(node, p)
		}
	}
	return node, target
}

// Split splits xs, keeping their order, into those to a node (KindNode)
// and those to an external target (KindTarget), as DestOf reads them;
// each is nil when it has none.
func Split[T Routed](xs []T) (node, target []T) {
	for _, x := range xs {
		if DestOf(x).InMesh() {
			node = append(node, x)
		} else {
			target = append(target, x)
		}
	}
	return node, target
}

// Applies reports whether test makes sense on path. Ping does not on the
// service paths: kube-proxy in iptables mode DNATs TCP and UDP only, so an
// ICMP echo to a ClusterIP goes unanswered on a healthy cluster. On the
// external paths run ping, HTTP, iperf3 and qperf (each only to a target
// that has what it needs: the scheduler checks that against the target's
// allowlist entry).
func Applies(test measurev1.Test, path measurev1.Path) bool {
	if KindOf(path) == KindTarget {
		switch Tool(test) {
		case measurev1.Tool_TOOL_IPERF3, measurev1.Tool_TOOL_QPERF:
			return true
		}
		return test == measurev1.Test_TEST_PING || test == measurev1.Test_TEST_HTTP
	}
	if test == measurev1.Test_TEST_PING {
		return path != measurev1.Path_PATH_POD_TO_SERVICE && path != measurev1.Path_PATH_HOST_TO_SERVICE
	}
	return true
}

// Destination is where one test goes, read once from its path and the
// wire's dst_node (measure.v1 PlannedTest and Result): a node or an
// external target, by name. The zero Destination is a node without a
// name.
type Destination struct {
	kind Kind
	name string
}

// Routed is a message that names a test's path and destination:
// *measurev1.PlannedTest and *measurev1.Result.
type Routed interface {
	GetPath() measurev1.Path
	GetDstNode() string
}

// DestinationOf returns the destination dstNode names on path p: a node,
// or an external target on the external paths. dstNode may be "" (the
// wire carried none); it is kept as is.
func DestinationOf(p measurev1.Path, dstNode string) Destination {
	return Destination{kind: KindOf(p), name: dstNode}
}

// ClientDestination returns where an agent's client work (agent.v1
// RunClient) goes, as its external_target field says: the external target
// it names, or, when it names none (""), a node whose name the agent is
// not told (the work carries its address, target_ip).
func ClientDestination(externalTarget string) Destination {
	if externalTarget != "" {
		return Destination{kind: KindTarget, name: externalTarget}
	}
	return Destination{kind: KindNode}
}

// DestOf is DestinationOf(m.GetPath(), m.GetDstNode()).
func DestOf(m Routed) Destination { return DestinationOf(m.GetPath(), m.GetDstNode()) }

// Kind returns whether d is a node or a target.
func (d Destination) Kind() Kind { return d.kind }

// Name is d's name as on the wire (dst_node): the node's or the target's.
func (d Destination) Name() string { return d.name }

// String is Name.
func (d Destination) String() string { return d.name }

// Node returns the node's name for a node destination, "" for a target:
// what a caller holds, reaches or counts as the destination node.
func (d Destination) Node() string {
	if d.kind == KindNode {
		return d.name
	}
	return ""
}

// Target returns the target's name for a target destination, "" for a
// node.
func (d Destination) Target() string {
	if d.kind == KindTarget {
		return d.name
	}
	return ""
}

// InMesh is d.Kind().InMesh(): node-pair statistics, the node-by-node
// matrix and node fault localisation apply to a test to d.
func (d Destination) InMesh() bool { return d.kind.InMesh() }

// Pick returns node when d is a node and target when d is an external
// target: what a caller does differently for the two kinds (a function, a
// value) chosen in one place, so no caller branches on the kind. A kind
// added to Destination changes Pick, and so every caller.
func Pick[T any](d Destination, node, target T) T {
	if d.kind == KindTarget {
		return target
	}
	return node
}

// Roles of a node in a test, as metrics and remote-write label them.
const (
	// RoleSrc is the node that ran the client.
	RoleSrc = "src"
	// RoleDst is the node the client measured against.
	RoleDst = "dst"
)

// End is one node of a test, in a role, with the test's other end.
type End struct {
	// Node is the node's name.
	Node string
	// Role is RoleSrc or RoleDst.
	Role string
	// Peer is the other end's name: the destination's (a node's or a
	// target's) for the source, the source's for the destination.
	Peer string
}

// Ends returns the nodes of a test from node src to d: the source, then
// the destination if d is a node. A target is no node: a test to it has
// the source alone. Names are as given, "" included.
func (d Destination) Ends(src string) []End {
	ends := []End{{Node: src, Role: RoleSrc, Peer: d.name}}
	if d.InMesh() {
		ends = append(ends, End{Node: d.name, Role: RoleDst, Peer: src})
	}
	return ends
}

// Nodes returns the names of Ends(src): src, and d's name if d is a node.
func (d Destination) Nodes(src string) []string {
	if d.InMesh() {
		return []string{src, d.name}
	}
	return []string{src}
}

// Entry returns the allowlist entry of a target destination: the entry
// of allowlist (the coordinator's external targets) with d's name. ok is
// false for a node, and for a target without a name or not in allowlist.
func (d Destination) Entry(allowlist []*measurev1.ExternalTarget) (entry *measurev1.ExternalTarget, ok bool) {
	if d.kind != KindTarget || d.name == "" {
		return nil, false
	}
	i := slices.IndexFunc(allowlist, func(t *measurev1.ExternalTarget) bool { return t.GetName() == d.name })
	if i < 0 {
		return nil, false
	}
	return allowlist[i], true
}

// Queued reports whether test, to d, runs outside the rounds of node
// pairs, in d's own queue: a heavy test (IsHeavy: iperf3, qperf) to an
// external target's server, which takes one client at a time over every
// run and may be busy with clients meshperf does not know of (so a busy
// answer is retried patiently).
func (d Destination) Queued(test measurev1.Test) bool {
	return d.kind == KindTarget && IsHeavy(test)
}
