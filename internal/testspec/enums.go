package testspec

import (
	"fmt"
	"strings"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// enumName is an enum value's name without its prefix, in lower case:
// enumName("STATUS_PARSE_ERROR", "STATUS_") is "parse_error". A value the
// enum does not know keeps protobuf's number ("12").
func enumName(s, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s, prefix))
}

// StatusName is the short lower-case name of a result status, as every
// table, message and metric label prints it: "ok", "unreachable",
// "parse_error", "tool_missing"; "unspecified" for none.
func StatusName(s measurev1.Status) string { return enumName(s.String(), "STATUS_") }

// RunStateName is the short lower-case name of a run state: "running",
// "succeeded"; "unspecified" for none.
func RunStateName(s measurev1.RunState) string { return enumName(s.String(), "RUN_STATE_") }

// OriginName is the short lower-case name of a run origin, as the CLI
// prints and takes it: "client", "monitor"; "unspecified" for none (give
// it OriginOf's answer to name a run's). ParseOrigin is its inverse.
func OriginName(o measurev1.RunOrigin) string { return enumName(o.String(), "RUN_ORIGIN_") }

// ParseOrigin is the inverse of OriginName for client and monitor, and
// also takes the enum's own name ("RUN_ORIGIN_MONITOR"); matching ignores
// case. The error wraps ErrInvalid and names the value.
func ParseOrigin(s string) (measurev1.RunOrigin, error) {
	want := strings.ToLower(strings.TrimSpace(s))
	for _, o := range []measurev1.RunOrigin{measurev1.RunOrigin_RUN_ORIGIN_CLIENT, measurev1.RunOrigin_RUN_ORIGIN_MONITOR} {
		if want == OriginName(o) || want == strings.ToLower(o.String()) {
			return o, nil
		}
	}
	return measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED, fmt.Errorf("%w: unknown run origin %q (want client or monitor)", ErrInvalid, s)
}

// RunEnded reports whether s is a state a run ends in (succeeded,
// failed, interrupted, canceled): none of its tests runs or will run.
// Queued, running and unspecified (never stored) are not.
func RunEnded(s measurev1.RunState) bool {
	switch s {
	case measurev1.RunState_RUN_STATE_SUCCEEDED, measurev1.RunState_RUN_STATE_FAILED,
		measurev1.RunState_RUN_STATE_INTERRUPTED, measurev1.RunState_RUN_STATE_CANCELED:
		return true
	}
	return false
}

// NodeStateName is the short lower-case name of a node's state in the
// registry: "ready", "maintenance"; "unspecified" for none.
func NodeStateName(s meshv1.NodeState) string { return enumName(s.String(), "NODE_STATE_") }

// GossipStateName is the short lower-case name of a gossip state, as the
// coordinator's logs and partition messages say it: "alive", "dead",
// "left"; "unspecified" for none. Tables print GossipStateOrDash.
func GossipStateName(s measurev1.GossipState) string { return enumName(s.String(), "GOSSIP_STATE_") }

// GossipStateOrDash is GossipStateName for a table column: "-" for none
// (an agent that reported no view), so that an empty cell reads as one.
func GossipStateOrDash(s measurev1.GossipState) string {
	if s == measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED {
		return "-"
	}
	return GossipStateName(s)
}

// NetworkName is the short lower-case name of an agent's network:
// "host", "pod"; "unspecified" for none.
func NetworkName(n measurev1.Network) string { return enumName(n.String(), "NETWORK_") }

// ProbeKindName is the short lower-case name of a probe kind, as the
// config file's probes section, the CLI's --kind, the web UI, the metric
// labels and the diagnosis say it: "icmp", "icmp_mtu", "tcp", "http";
// "unspecified" for none. ParseProbeKind is its inverse.
func ProbeKindName(k measurev1.ProbeKind) string { return enumName(k.String(), "PROBE_KIND_") }

// ProbeKinds returns every probe kind in enum order (unspecified left
// out): icmp, icmp_mtu, tcp, http.
func ProbeKinds() []measurev1.ProbeKind {
	var out []measurev1.ProbeKind
	for k := measurev1.ProbeKind(1); ; k++ {
		if _, ok := measurev1.ProbeKind_name[int32(k)]; !ok {
			return out
		}
		out = append(out, k)
	}
}

// probeTestPrefix starts a probe kind's test name (ProbeTestName).
const probeTestPrefix = "probe_"

// ProbeTestName is the name the continuous probes' series of kind k go by
// where they stand beside the tests' (the web UI's mesh, remote write's
// test label): "probe_" and ProbeKindName, e.g. "probe_icmp".
// ParseProbeTestName is its inverse.
func ProbeTestName(k measurev1.ProbeKind) string { return probeTestPrefix + ProbeKindName(k) }

// ParseProbeTestName is the inverse of ProbeTestName for the kinds of
// ProbeKinds; ok is false for any other name.
func ParseProbeTestName(name string) (k measurev1.ProbeKind, ok bool) {
	rest, ok := strings.CutPrefix(name, probeTestPrefix)
	if !ok {
		return measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, false
	}
	return ParseProbeKind(rest)
}

// IsProbeKind reports whether k is one of ProbeKinds (not unspecified,
// not a value the enum does not define).
func IsProbeKind(k measurev1.ProbeKind) bool {
	_, ok := measurev1.ProbeKind_name[int32(k)]
	return ok && k != measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED
}

// ParseProbeKind is the inverse of ProbeKindName for the kinds of
// ProbeKinds: the exact short name ("icmp_mtu"), case included. ok is
// false for any other string, "unspecified" too.
func ParseProbeKind(name string) (k measurev1.ProbeKind, ok bool) {
	for _, k := range ProbeKinds() {
		if ProbeKindName(k) == name {
			return k, true
		}
	}
	return measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, false
}
