package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// FaultKind is a fault the lab can inject into one node, each as an
// operator meets it in a real cluster.
type FaultKind string

// The faults. Each breaks or slows every path to and from one node and
// nothing else, so that the node can be told from the mesh's results.
const (
	// FaultPodDrop drops, on the node, forwarded traffic between its pod
	// CIDR and every other node's pod CIDR, both ways (as if the CNI's
	// routes or policies were broken there): pod -> pod and pod ->
	// ClusterIP across nodes fail when the node is either end, host paths
	// work.
	FaultPodDrop FaultKind = "pod-drop"
	// FaultMTUBlackhole drops, on the node, forwarded packets between its
	// pod CIDR and the other nodes' pod CIDRs that are longer than
	// Fault.MTUBytes, without the ICMP "fragmentation needed" that would
	// let senders adapt: a VXLAN MTU black hole. Small packets (ping, TCP
	// latency, short HTTP) pass; bulk transfers across pods stall.
	FaultMTUBlackhole FaultKind = "mtu-blackhole"
	// FaultRateLimit shapes every packet leaving the node and every packet
	// reaching it on the fabric to Fault.RateBPS with a `tc qdisc tbf`
	// (host and pod traffic alike, as a bad NIC or a noisy neighbour does).
	FaultRateLimit FaultKind = "rate-limit"
	// FaultICMPDrop drops ICMP echo requests and replies to, from and
	// through the node (a firewall rule): ping fails, TCP works.
	FaultICMPDrop FaultKind = "icmp-drop"
)

// FaultKinds lists the kinds in the order they are documented.
var FaultKinds = []FaultKind{FaultPodDrop, FaultMTUBlackhole, FaultRateLimit, FaultICMPDrop}

// Defaults of Fault's parameters.
const (
	// DefaultFaultMTU is FaultMTUBlackhole's default largest packet that
	// passes, in bytes (IP length): 1400, below every lab MTU.
	DefaultFaultMTU = 1400
	// DefaultFaultRateBPS is FaultRateLimit's default rate in bits per
	// second: 100 Mbit/s, far below what veth carries.
	DefaultFaultRateBPS = 100_000_000
)

// Bounds of Fault's parameters.
const (
	// MinFaultMTU and MaxFaultMTU bound Fault.MTUBytes, in bytes.
	MinFaultMTU, MaxFaultMTU = 576, 9000 //nolint:revive // exported: one bound, documented once
	// MinFaultRateBPS and MaxFaultRateBPS bound Fault.RateBPS, in bits per
	// second (1 Mbit/s .. 100 Gbit/s).
	MinFaultRateBPS, MaxFaultRateBPS = 1_000_000, 100_000_000_000 //nolint:revive // exported: one bound, documented once
)

// Fault is one fault on one node.
type Fault struct {
	// Kind is what breaks.
	Kind FaultKind
	// Node is the node's name, e.g. "node-2".
	Node string
	// MTUBytes is FaultMTUBlackhole's largest packet that passes (IP
	// length, bytes), MinFaultMTU..MaxFaultMTU; 0 means DefaultFaultMTU.
	// Other kinds ignore it.
	MTUBytes int
	// RateBPS is FaultRateLimit's rate in bits per second,
	// MinFaultRateBPS..MaxFaultRateBPS; 0 means DefaultFaultRateBPS. Other
	// kinds ignore it.
	RateBPS uint64
}

// String is the fault as `meshlab fault add` takes it, e.g.
// "mtu-blackhole on node-2 (1400 bytes)".
func (f Fault) String() string {
	switch f.Kind {
	case FaultMTUBlackhole:
		return fmt.Sprintf("%s on %s (packets over %d bytes dropped)", f.Kind, f.Node, f.MTUBytes)
	case FaultRateLimit:
		return fmt.Sprintf("%s on %s (%s)", f.Kind, f.Node, formatRate(f.RateBPS))
	}
	return fmt.Sprintf("%s on %s", f.Kind, f.Node)
}

// formatRate writes bits per second as tc reads them, e.g. "100mbit".
func formatRate(bps uint64) string {
	switch {
	case bps%1_000_000_000 == 0:
		return strconv.FormatUint(bps/1_000_000_000, 10) + "gbit"
	case bps%1_000_000 == 0:
		return strconv.FormatUint(bps/1_000_000, 10) + "mbit"
	case bps%1_000 == 0:
		return strconv.FormatUint(bps/1_000, 10) + "kbit"
	}
	return strconv.FormatUint(bps, 10) + "bit"
}

// ErrNoLab means Find found no lab under the prefix.
var ErrNoLab = errors.New("no lab")

// ErrFault wraps refusals of Inject and Clear: an unknown kind or node, a
// parameter out of range, or a fault of that kind already on the node.
var ErrFault = errors.New("bad fault")

// check validates f against l and fills in the defaults.
func (f *Fault) check(l *Lab) (Node, error) {
	if !slices.Contains(FaultKinds, f.Kind) {
		return Node{}, fmt.Errorf("%w: Kind %q: want one of %s", ErrFault, f.Kind, kindList())
	}
	n, ok := l.Node(f.Node)
	if !ok {
		return Node{}, fmt.Errorf("%w: Node %q: the lab has node-1 .. node-%d", ErrFault, f.Node, len(l.Nodes))
	}
	if f.Kind == FaultMTUBlackhole {
		if f.MTUBytes == 0 {
			f.MTUBytes = DefaultFaultMTU
		}
		if f.MTUBytes < MinFaultMTU || f.MTUBytes > MaxFaultMTU {
			return Node{}, fmt.Errorf("%w: MTUBytes %d: want %d..%d", ErrFault, f.MTUBytes, MinFaultMTU, MaxFaultMTU)
		}
	}
	if f.Kind == FaultRateLimit {
		if f.RateBPS == 0 {
			f.RateBPS = DefaultFaultRateBPS
		}
		if f.RateBPS < MinFaultRateBPS || f.RateBPS > MaxFaultRateBPS {
			return Node{}, fmt.Errorf("%w: RateBPS %d: want %d..%d bit/s", ErrFault, f.RateBPS, uint64(MinFaultRateBPS), uint64(MaxFaultRateBPS))
		}
	}
	return n, nil
}

func kindList() string {
	s := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// chainOf is the iptables chain (filter table, node namespace) holding a
// kind's rules; rate-limit has none.
func chainOf(k FaultKind) string {
	switch k {
	case FaultPodDrop:
		return "MESHLAB-POD-DROP"
	case FaultMTUBlackhole:
		return "MESHLAB-MTU"
	case FaultICMPDrop:
		return "MESHLAB-ICMP"
	}
	return ""
}

// hooks are the built-in chains that jump to a kind's chain: forwarded
// (pod) traffic only, or everything the node sends, receives or forwards.
func hooks(k FaultKind) []string {
	if k == FaultICMPDrop {
		return []string{"INPUT", "OUTPUT", "FORWARD"}
	}
	return []string{"FORWARD"}
}

// faultRules returns the iptables-restore input that creates f's chain
// (flushing it if it exists) and jumps to it.
func faultRules(l *Lab, n Node, f Fault) string {
	chain := chainOf(f.Kind)
	var sb strings.Builder
	fmt.Fprintf(&sb, "*filter\n:%s - [0:0]\n", chain)
	for _, h := range hooks(f.Kind) {
		fmt.Fprintf(&sb, "-I %s -j %s\n", h, chain)
	}
	if f.Kind == FaultICMPDrop {
		for _, t := range []string{"echo-request", "echo-reply"} {
			fmt.Fprintf(&sb, "-A %s -p icmp --icmp-type %s -j DROP\n", chain, t)
		}
		sb.WriteString("COMMIT\n")
		return sb.String()
	}
	// In vxlan mode a node reaches other nodes' pods from its VTEP address,
	// which lies inside its pod CIDR: host -> pod traffic is not pod
	// traffic, let it by.
	for _, p := range l.Nodes {
		if p.VTEPIP.IsValid() {
			fmt.Fprintf(&sb, "-A %s -s %s/32 -j RETURN\n-A %s -d %s/32 -j RETURN\n", chain, p.VTEPIP, chain, p.VTEPIP)
		}
	}
	match := ""
	if f.Kind == FaultMTUBlackhole {
		match = fmt.Sprintf(" -m length --length %d:65535", f.MTUBytes+1)
	}
	for _, p := range l.Nodes {
		if p.Index == n.Index {
			continue
		}
		fmt.Fprintf(&sb, "-A %s -s %s -d %s%s -j DROP\n", chain, n.PodCIDR, p.PodCIDR, match)
		fmt.Fprintf(&sb, "-A %s -s %s -d %s%s -j DROP\n", chain, p.PodCIDR, n.PodCIDR, match)
	}
	sb.WriteString("COMMIT\n")
	return sb.String()
}

// fabricPort is the fabric namespace's end of node n's link, a port of br0.
func fabricPort(n Node) string { return "n" + strconv.Itoa(n.Index) }

// tbf is the tc argv of FaultRateLimit's qdisc on dev: a 64 KiB bucket
// (enough for one TSO burst at these rates) and 50 ms of queue.
func tbf(rate uint64, dev string) []string {
	return []string{"qdisc", "add", "dev", dev, "root", "tbf", "rate", formatRate(rate), "burst", "64kb", "latency", "50ms"}
}

// Inject puts fault f on its node. It fails with ErrFault on a bad fault
// (the message names the field and value) or when the node has a fault of
// that kind already, and otherwise names the command that failed. The
// fault lasts until Clear, or until the lab is removed.
func Inject(ctx context.Context, l *Lab, f Fault) error {
	n, err := f.check(l)
	if err != nil {
		return err
	}
	if err := checkRoot(); err != nil {
		return err
	}
	if err := checkPrograms(faultTools); err != nil {
		return err
	}
	r := runner{log: loggerOf(l)}
	have, err := nodeFaults(ctx, r, n)
	if err != nil {
		return err
	}
	for _, h := range have {
		if h.Kind == f.Kind {
			return fmt.Errorf("%w: %s has a %s fault already (meshlab fault clear first)", ErrFault, n.Name, f.Kind)
		}
	}
	if f.Kind == FaultRateLimit {
		if _, err := r.run(ctx, "", NSExec(n.HostNetNSPath, append([]string{"tc"}, tbf(f.RateBPS, HostIface)...)...)...); err != nil {
			return fmt.Errorf("inject %s: %w", f, err)
		}
		if _, err := r.run(ctx, "", NSExec(l.FabricNetNSPath, append([]string{"tc"}, tbf(f.RateBPS, fabricPort(n))...)...)...); err != nil {
			return errors.Join(fmt.Errorf("inject %s: %w", f, err), clearFault(ctx, r, l, n, f.Kind))
		}
	} else {
		rules := faultRules(l, n, f)
		if _, err := r.run(ctx, rules, NSExec(n.HostNetNSPath, "iptables-restore", "-w", iptablesWait, "--noflush")...); err != nil {
			return fmt.Errorf("inject %s:\n%s: %w", f, rules, err)
		}
	}
	loggerOf(l).InfoContext(ctx, "fault injected", "fault", f.String())
	return nil
}

// Clear removes the faults of kind from node (both may be empty: every
// kind, every node) and returns what it removed. Clearing what is not
// there is no error.
func Clear(ctx context.Context, l *Lab, node string, kind FaultKind) ([]Fault, error) {
	if kind != "" && !slices.Contains(FaultKinds, kind) {
		return nil, fmt.Errorf("%w: Kind %q: want one of %s", ErrFault, kind, kindList())
	}
	if node != "" {
		if _, ok := l.Node(node); !ok {
			return nil, fmt.Errorf("%w: Node %q: the lab has node-1 .. node-%d", ErrFault, node, len(l.Nodes))
		}
	}
	if err := checkRoot(); err != nil {
		return nil, err
	}
	r := runner{log: loggerOf(l)}
	var cleared []Fault
	var errs []error
	for _, n := range l.Nodes {
		if node != "" && n.Name != node {
			continue
		}
		have, err := nodeFaults(ctx, r, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range have {
			if kind != "" && f.Kind != kind {
				continue
			}
			if err := clearFault(ctx, r, l, n, f.Kind); err != nil {
				errs = append(errs, err)
				continue
			}
			loggerOf(l).InfoContext(ctx, "fault cleared", "fault", f.String())
			cleared = append(cleared, f)
		}
	}
	return cleared, errors.Join(errs...)
}

// clearFault removes one kind of fault from n, whatever of it exists.
func clearFault(ctx context.Context, r runner, l *Lab, n Node, kind FaultKind) error {
	if kind == FaultRateLimit {
		var errs []error
		for _, at := range []struct{ ns, dev string }{{n.HostNetNSPath, HostIface}, {l.FabricNetNSPath, fabricPort(n)}} {
			out, err := r.run(ctx, "", NSExec(at.ns, "tc", "qdisc", "show", "dev", at.dev, "root")...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if strings.Contains(out, "qdisc tbf") {
				if _, err := r.run(ctx, "", NSExec(at.ns, "tc", "qdisc", "del", "dev", at.dev, "root")...); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("clear %s on %s: %w", kind, n.Name, err)
		}
		return nil
	}
	chain := chainOf(kind)
	ipt := func(args ...string) error {
		_, err := r.run(ctx, "", NSExec(n.HostNetNSPath, append([]string{"iptables", "-w", iptablesWait}, args...)...)...)
		return err
	}
	for _, h := range hooks(kind) {
		// Delete every jump (an interrupted Inject may have left several).
		for range 16 {
			if ipt("-C", h, "-j", chain) != nil {
				break
			}
			if err := ipt("-D", h, "-j", chain); err != nil {
				return fmt.Errorf("clear %s on %s: %w", kind, n.Name, err)
			}
		}
	}
	if ipt("-n", "-L", chain) != nil {
		return nil // no chain
	}
	if err := ipt("-F", chain); err != nil {
		return fmt.Errorf("clear %s on %s: %w", kind, n.Name, err)
	}
	if err := ipt("-X", chain); err != nil {
		return fmt.Errorf("clear %s on %s: %w", kind, n.Name, err)
	}
	return nil
}

// Faults lists the faults injected into the lab's nodes, node by node in
// the order of FaultKinds.
func Faults(ctx context.Context, l *Lab) ([]Fault, error) {
	r := runner{log: loggerOf(l)}
	var out []Fault
	for _, n := range l.Nodes {
		fs, err := nodeFaults(ctx, r, n)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// nodeFaults reads node n's faults from its iptables chains and its root
// qdisc: a kind's chain or a tbf on HostIface means the fault is there.
func nodeFaults(ctx context.Context, r runner, n Node) ([]Fault, error) {
	rules, err := r.run(ctx, "", NSExec(n.HostNetNSPath, "iptables-save", "-t", "filter")...)
	if err != nil {
		return nil, fmt.Errorf("read %s's faults: %w", n.Name, err)
	}
	qdisc, err := r.run(ctx, "", NSExec(n.HostNetNSPath, "tc", "qdisc", "show", "dev", HostIface, "root")...)
	if err != nil {
		return nil, fmt.Errorf("read %s's faults: %w", n.Name, err)
	}
	var out []Fault
	for _, k := range FaultKinds {
		f := Fault{Kind: k, Node: n.Name}
		switch k {
		case FaultRateLimit:
			rate, ok := parseTBFRate(qdisc)
			if !ok {
				continue
			}
			f.RateBPS = rate
		default:
			if !strings.Contains(rules, "\n:"+chainOf(k)+" ") {
				continue
			}
			if k == FaultMTUBlackhole {
				f.MTUBytes = parseLengthMatch(rules, chainOf(k))
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// parseTBFRate reads the rate of a tbf in `tc qdisc show` output, e.g.
// "qdisc tbf 8001: root refcnt 2 rate 100Mbit burst 64Kb lat 50ms"
// (iproute2 6.1; decimal prefixes).
func parseTBFRate(out string) (uint64, bool) {
	fields := strings.Fields(out)
	if len(fields) < 2 || fields[0] != "qdisc" || fields[1] != "tbf" {
		return 0, false
	}
	for i, f := range fields[:len(fields)-1] {
		if f != "rate" {
			continue
		}
		v := strings.TrimSuffix(fields[i+1], "bit")
		mult := uint64(1)
		switch {
		case strings.HasSuffix(v, "G"):
			mult, v = 1_000_000_000, strings.TrimSuffix(v, "G")
		case strings.HasSuffix(v, "M"):
			mult, v = 1_000_000, strings.TrimSuffix(v, "M")
		case strings.HasSuffix(v, "K"):
			mult, v = 1_000, strings.TrimSuffix(v, "K")
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x <= 0 {
			return 0, false
		}
		return uint64(x * float64(mult)), true
	}
	return 0, false
}

// parseLengthMatch reads the smallest dropped length of chain's first
// "-m length --length A:B" rule in iptables-save output and returns A-1,
// the largest packet that passes; 0 if there is none.
func parseLengthMatch(rules, chain string) int {
	for _, line := range strings.Split(rules, "\n") {
		if !strings.HasPrefix(line, "-A "+chain+" ") {
			continue
		}
		_, rest, ok := strings.Cut(line, "--length ")
		if !ok {
			continue
		}
		lo, _, _ := strings.Cut(rest, ":")
		if v, err := strconv.Atoi(lo); err == nil && v > 1 {
			return v - 1
		}
	}
	return 0
}

// Find describes the lab that exists under prefix: its node count from its
// namespaces, its mode from node 1's interfaces. It fails with ErrNoLab
// when no lab exists under prefix.
func Find(ctx context.Context, prefix string, logger *slog.Logger) (*Lab, error) {
	st, err := Status(ctx, prefix)
	if err != nil {
		return nil, err
	}
	nodes, mode := 0, ModeHostGW
	for _, ns := range st.Namespaces {
		p, ok := parseNSName(prefix, ns.Name)
		if !ok || p.class != classNode {
			continue
		}
		nodes++
		for _, ifc := range ns.Interfaces {
			if ifc.Name == VXLANIface {
				mode = ModeVXLAN
			}
		}
	}
	if nodes == 0 {
		return nil, fmt.Errorf("%w %q: no node namespace (meshlab up --prefix %s)", ErrNoLab, prefix, prefix)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return Describe(Config{Prefix: prefix, Nodes: nodes, Mode: mode, Logger: logger})
}

// loggerOf is l's logger, never nil.
func loggerOf(l *Lab) *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.New(slog.DiscardHandler)
}
