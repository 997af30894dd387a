// Package probeplan owns the coordinator's continuous-probe plans: one
// shared peer Table (every plannable node's addresses and ports, plus the
// probe settings) with a global revision counter and a changelog, from
// which it builds for any agent the ProbePlan (proto
// meshperf.agent.v1.ProbePlan) that brings it from the version it holds to
// the current one, in O(changes) rather than O(nodes); and a Follower, the
// per-session state machine that decides when to send a plan (after a
// debounce, one plan in flight at a time) and how versions chain.
//
// Ownership: the registry owns one Table and writes it (Upsert on a
// registration, Remove when a node departs, SetSettings from the
// coordinator's config). Each agent session owns one Follower, used only
// from the session's goroutine. Plans returned by the Table belong to the
// caller, but their ProbePeer and ProbeSettings messages are shared with the
// Table and with other sessions' plans: marshal them, never modify them.
//
// Versions: a plan's version is the Table's revision when it was built.
// Revisions start at a clock-derived value (Options.FirstRevision), so that
// a restarted coordinator's versions still grow past the previous one's.
// See Table.Delta and Follower for the chaining rules.
//
// Encoding: each peer is encoded once, when it is upserted; the plans a
// Follower hands out carry those bytes as they are (Follower.Next), so a
// full plan of 5,000 peers costs a copy of ~250 KB, not 5,000 message
// encodings, once per agent of a join wave.
//
// Size bound: a peer is at most ~430 bytes on the wire (a 253-byte name,
// three IPv6 addresses, five integers), so a full plan of 5,000 peers is at
// most ~2.2 MB (~300 KB with typical names), under gRPC's default 4 MB
// message limit; plans are not split. Clusters beyond ~9,000 nodes with
// maximal names would need a larger limit or a Split.
package probeplan

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// ErrInvalid is wrapped by the errors of Table.Upsert for a peer it
// refuses; the message names the field and its value. Match it with
// errors.Is.
var ErrInvalid = errors.New("invalid peer")

// Peer is one plannable node as other agents see it: the Go form of
// agentv1.ProbePeer. It is comparable; Upsert compares whole values to
// decide whether anything changed.
type Peer struct {
	// Name is the node name (protocol.ValidateNodeName).
	Name string
	// HostIP is its host network address; required.
	HostIP netip.Addr
	// PodIP is its pod network address; the zero Addr if none.
	PodIP netip.Addr
	// ServiceIP is the ClusterIP fronting its pod endpoint; the zero Addr
	// if none.
	ServiceIP netip.Addr
	// HostIPv6, PodIPv6 and ServiceIPv6 are a dual-stack node's IPv6
	// addresses beside the IPv4 ones above; the zero Addr if none (an
	// IPv6-only node has its addresses above). Agents take them as
	// registered endpoints of the node.
	HostIPv6, PodIPv6, ServiceIPv6 netip.Addr
	// ProbePort is its TCP echo responder's port, 1..65535.
	ProbePort uint32
	// HTTPPort is its HTTP target's port, 0 (unknown) or 1..65535.
	HTTPPort uint32
	// HostMTU and PodMTU are its interfaces' MTUs in bytes per network: 0
	// (unknown) or protocol.MinMTUBytes..protocol.MaxMTUBytes.
	HostMTU, PodMTU uint32
	// Maintenance says the node is cordoned: agents do not probe it, but it
	// stays in their plans as a registered endpoint.
	Maintenance bool
}

// Validate reports why p cannot be planned: an error wrapping ErrInvalid
// that names the field and value, or nil.
func (p Peer) Validate() error {
	bad := func(field string, v any, why any) error {
		return fmt.Errorf("%w: peer %q: %s %v: %v", ErrInvalid, p.Name, field, v, why)
	}
	if err := protocol.ValidateNodeName(p.Name); err != nil {
		return fmt.Errorf("%w: node_name: %v", ErrInvalid, err) //nolint:errorlint // the sentinel decides errors.Is; the cause is text only
	}
	if !p.HostIP.IsValid() {
		return bad("host_ip", `""`, "missing")
	}
	for _, a := range []struct {
		field string
		ip    netip.Addr
	}{{"host_ip", p.HostIP}, {"pod_ip", p.PodIP}, {"service_ip", p.ServiceIP},
		{"host_ipv6", p.HostIPv6}, {"pod_ipv6", p.PodIPv6}, {"service_ipv6", p.ServiceIPv6}} {
		if !a.ip.IsValid() {
			continue // optional ones; host_ip checked above
		}
		if _, err := protocol.ParseEndpointIP(a.ip.String()); err != nil {
			return bad(a.field, a.ip, err)
		}
		if strings.HasSuffix(a.field, "v6") && !a.ip.Is6() {
			return bad(a.field, a.ip, "not an IPv6 address")
		}
	}
	if p.ProbePort == 0 || p.ProbePort > 65535 {
		return bad("probe_port", p.ProbePort, "want 1..65535")
	}
	if p.HTTPPort > 65535 {
		return bad("http_port", p.HTTPPort, "want 0 (unknown) or 1..65535")
	}
	for _, m := range []struct {
		field string
		v     uint32
	}{{"host_mtu_bytes", p.HostMTU}, {"pod_mtu_bytes", p.PodMTU}} {
		if m.v != 0 && (m.v < protocol.MinMTUBytes || m.v > protocol.MaxMTUBytes) {
			return bad(m.field, m.v, fmt.Sprintf("want 0 (unknown) or %d..%d", protocol.MinMTUBytes, protocol.MaxMTUBytes))
		}
	}
	return nil
}

// Proto returns p as a new agentv1.ProbePeer; absent addresses are empty
// strings.
func (p Peer) Proto() *agentv1.ProbePeer {
	str := func(a netip.Addr) string {
		if !a.IsValid() {
			return ""
		}
		return a.String()
	}
	return &agentv1.ProbePeer{
		NodeName: p.Name, HostIp: str(p.HostIP), PodIp: str(p.PodIP), ServiceIp: str(p.ServiceIP),
		HostIpv6: str(p.HostIPv6), PodIpv6: str(p.PodIPv6), ServiceIpv6: str(p.ServiceIPv6),
		ProbePort: p.ProbePort, HttpPort: p.HTTPPort, HostMtuBytes: p.HostMTU, PodMtuBytes: p.PodMTU,
		Maintenance: p.Maintenance,
	}
}
