package probe

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// settings are validated ProbeSettings.
type settings struct {
	interval, reportInterval, timeout time.Duration
	kinds                             []measurev1.ProbeKind
	paths                             []measurev1.Path
	payload                           int
	maxInFlight                       int
	maxPPS                            int
	subsetSize                        int
	subsetRotation                    time.Duration
	families                          []measurev1.IPFamily   // empty: IPv4 only, unlabelled
	src                               *agentv1.ProbeSettings // as received, for deltas
}

// peer is a validated ProbePeer.
type peer struct {
	name                        string
	hostIP, podIP, serviceIP    netip.Addr // podIP, serviceIP: zero if none
	hostIP6, podIP6, serviceIP6 netip.Addr // zero if none
	probePort, httpPort         uint16     // 0: none
	hostMTU, podMTU             int        // 0: unknown
	maintenance                 bool       // cordoned: not probed
}

// plan is a held plan; never modified once held.
type plan struct {
	version  uint64
	settings *settings // nil: probing stopped
	peers    map[string]peer
}

// Apply brings the Prober to plan.version and returns the version it holds
// afterwards. A full plan (base_version 0) replaces the held one; a delta
// applies to exactly the held version, else Apply returns an error
// wrapping ErrBaseVersion. Any error leaves the held plan (and the version
// returned) unchanged; errors name the field and the value refused. A full
// plan without settings holds its peers but stops probing. Probing
// follows the new plan from the scheduler's next step; open report
// periods are closed early when the settings change.
func (p *Prober) Apply(pl *agentv1.ProbePlan) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var held uint64
	if p.plan != nil {
		held = p.plan.version
	}
	next, err := p.build(p.plan, pl)
	if err != nil {
		return held, fmt.Errorf("probe plan %d (base %d): %w", pl.GetVersion(), pl.GetBaseVersion(), err)
	}
	p.plan = next
	select {
	case p.changed <- struct{}{}:
	default:
	}
	return next.version, nil
}

// build validates pl against the held plan and returns the plan it makes.
func (p *Prober) build(held *plan, pl *agentv1.ProbePlan) (*plan, error) {
	if pl == nil {
		return nil, fmt.Errorf("plan is nil")
	}
	next := &plan{version: pl.GetVersion()}
	if next.version == 0 {
		return nil, fmt.Errorf("version 0 is not a plan version")
	}
	if base := pl.GetBaseVersion(); base == 0 {
		if len(pl.GetRemove()) > 0 {
			return nil, fmt.Errorf("a full plan has remove (%d names); removals are for deltas", len(pl.GetRemove()))
		}
		next.peers = make(map[string]peer, len(pl.GetUpsert()))
		if pl.GetSettings() != nil {
			s, err := checkSettings(pl.GetSettings())
			if err != nil {
				return nil, err
			}
			next.settings = s
		}
	} else {
		if held == nil || held.version != base {
			var hv uint64
			if held != nil {
				hv = held.version
			}
			return nil, fmt.Errorf("base_version %d, held %d: %w", base, hv, ErrBaseVersion)
		}
		if next.version <= base {
			return nil, fmt.Errorf("version %d does not grow from base_version %d", next.version, base)
		}
		next.settings = held.settings
		if pl.GetSettings() != nil {
			s, err := checkSettings(pl.GetSettings())
			if err != nil {
				return nil, err
			}
			next.settings = s
		}
		next.peers = maps.Clone(held.peers)
		upserted := make(map[string]bool, len(pl.GetUpsert()))
		for _, u := range pl.GetUpsert() {
			upserted[u.GetNodeName()] = true
		}
		for i, name := range pl.GetRemove() {
			// A removal of a peer not held is no error: the coordinator's
			// table names a peer that came and went after base as removed,
			// without keeping each peer's history (coordinator/probeplan).
			if err := protocol.ValidateNodeName(name); err != nil {
				return nil, fmt.Errorf("remove[%d]: %w", i, err)
			}
			if upserted[name] {
				return nil, fmt.Errorf("remove[%d]: %q is also upserted", i, name)
			}
			delete(next.peers, name)
		}
	}
	seen := make(map[string]bool, len(pl.GetUpsert()))
	for i, u := range pl.GetUpsert() {
		pe, err := p.checkPeer(u)
		if err != nil {
			return nil, fmt.Errorf("upsert[%d]: %w", i, err)
		}
		if seen[pe.name] {
			return nil, fmt.Errorf("upsert[%d]: node %q is upserted twice", i, pe.name)
		}
		seen[pe.name] = true
		next.peers[pe.name] = pe
		if len(next.peers) > protocol.ProbeMaxPeers {
			return nil, fmt.Errorf("more than %d peers", protocol.ProbeMaxPeers)
		}
	}
	return next, nil
}

// duration checks a Duration field: set, normalised, within [lo, hi].
func duration(field string, d *durationpb.Duration, lo, hi time.Duration) (time.Duration, error) {
	if d == nil {
		return 0, fmt.Errorf("settings.%s is not set", field)
	}
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("settings.%s %v: %w", field, d, err)
	}
	v := d.AsDuration()
	if v < lo || v > hi {
		return 0, fmt.Errorf("settings.%s %v is not within %v..%v", field, v, lo, hi)
	}
	return v, nil
}

// checkSettings validates ProbeSettings.
func checkSettings(in *agentv1.ProbeSettings) (*settings, error) {
	s := &settings{src: in}
	var err error
	if s.interval, err = duration("interval", in.GetInterval(), protocol.ProbeMinInterval, protocol.ProbeMaxInterval); err != nil {
		return nil, err
	}
	if s.reportInterval, err = duration("report_interval", in.GetReportInterval(), s.interval, protocol.ProbeMaxReportInterval); err != nil {
		return nil, err
	}
	if s.reportInterval%s.interval != 0 {
		return nil, fmt.Errorf("settings.report_interval %v is not a whole multiple of interval %v", s.reportInterval, s.interval)
	}
	if s.timeout, err = duration("timeout", in.GetTimeout(), protocol.ProbeMinTimeout, s.interval-time.Nanosecond); err != nil {
		return nil, fmt.Errorf("%w (timeout must be under interval)", err)
	}
	if s.kinds, err = enumSet("kinds", in.GetKinds(), testspec.IsProbeKind, "a known probe kind"); err != nil {
		return nil, err
	}
	if s.paths, err = enumSet("paths", in.GetPaths(), testspec.IsProbePath,
		"a mesh path ("+strings.Join(testspec.PathNamesOf(testspec.ProbePaths()), ", ")+")"); err != nil {
		return nil, err
	}
	if v := in.GetPayloadBytes(); v > protocol.ProbeMaxPayloadBytes {
		return nil, fmt.Errorf("settings.payload_bytes %d is over %d", v, protocol.ProbeMaxPayloadBytes)
	}
	s.payload = int(in.GetPayloadBytes())
	if v := in.GetMaxInFlight(); v < 1 || v > protocol.ProbeMaxInFlight {
		return nil, fmt.Errorf("settings.max_in_flight %d is not within 1..%d", v, protocol.ProbeMaxInFlight)
	}
	s.maxInFlight = int(in.GetMaxInFlight())
	if v := in.GetMaxPacketsPerSecond(); v < 1 || v > protocol.ProbeMaxPacketsPerSecond {
		return nil, fmt.Errorf("settings.max_packets_per_second %d is not within 1..%d", v, protocol.ProbeMaxPacketsPerSecond)
	}
	s.maxPPS = int(in.GetMaxPacketsPerSecond())
	if v := in.GetSubsetSize(); v > protocol.ProbeMaxPeers {
		return nil, fmt.Errorf("settings.subset_size %d is over %d", v, protocol.ProbeMaxPeers)
	}
	s.subsetSize = int(in.GetSubsetSize())
	if s.subsetSize > 0 {
		if s.subsetRotation, err = duration("subset_rotation", in.GetSubsetRotation(), s.interval, protocol.ProbeMaxReportInterval); err != nil {
			return nil, fmt.Errorf("%w (with subset_size %d)", err, s.subsetSize)
		}
	} else if in.GetSubsetRotation() != nil {
		return nil, fmt.Errorf("settings.subset_rotation %v is set without subset_size", in.GetSubsetRotation().AsDuration())
	}
	for i, f := range in.GetIpFamilies() {
		if f != measurev1.IPFamily_IP_FAMILY_IPV4 && f != measurev1.IPFamily_IP_FAMILY_IPV6 {
			return nil, fmt.Errorf("settings.ip_families[%d] %v is neither IP_FAMILY_IPV4 nor IP_FAMILY_IPV6", i, f)
		}
		if slices.Contains(s.families, f) {
			return nil, fmt.Errorf("settings.ip_families[%d] %v is listed twice", i, f)
		}
		s.families = append(s.families, f)
	}
	return s, nil
}

// checkPeer validates a ProbePeer.
func (p *Prober) checkPeer(in *agentv1.ProbePeer) (peer, error) {
	if in == nil {
		return peer{}, fmt.Errorf("peer is nil")
	}
	if err := protocol.ValidateNodeName(in.GetNodeName()); err != nil {
		return peer{}, fmt.Errorf("node_name: %w", err)
	}
	pe := peer{name: in.GetNodeName(), maintenance: in.GetMaintenance()}
	if pe.name == p.cfg.Node {
		return peer{}, fmt.Errorf("node_name %q is this agent's own node", pe.name)
	}
	var err error
	if pe.hostIP, err = p.checkIP(in.GetHostIp(), false); err != nil {
		return peer{}, fmt.Errorf("peer %q: host_ip: %w", pe.name, err)
	}
	if pe.podIP, err = p.checkIP(in.GetPodIp(), true); err != nil {
		return peer{}, fmt.Errorf("peer %q: pod_ip: %w", pe.name, err)
	}
	if pe.serviceIP, err = p.checkIP(in.GetServiceIp(), true); err != nil {
		return peer{}, fmt.Errorf("peer %q: service_ip: %w", pe.name, err)
	}
	for _, a := range []struct {
		field string
		in    string
		out   *netip.Addr
	}{{"host_ipv6", in.GetHostIpv6(), &pe.hostIP6}, {"pod_ipv6", in.GetPodIpv6(), &pe.podIP6}, {"service_ipv6", in.GetServiceIpv6(), &pe.serviceIP6}} {
		if *a.out, err = p.checkIP(a.in, true); err != nil {
			return peer{}, fmt.Errorf("peer %q: %s: %w", pe.name, a.field, err)
		}
		if a.out.IsValid() && a.out.Is4() {
			return peer{}, fmt.Errorf("peer %q: %s %q is not an IPv6 address", pe.name, a.field, a.in)
		}
	}
	if pe.probePort, err = checkPort(in.GetProbePort()); err != nil {
		return peer{}, fmt.Errorf("peer %q: probe_port: %w", pe.name, err)
	}
	if pe.httpPort, err = checkPort(in.GetHttpPort()); err != nil {
		return peer{}, fmt.Errorf("peer %q: http_port: %w", pe.name, err)
	}
	if pe.hostMTU, err = checkMTU(in.GetHostMtuBytes()); err != nil {
		return peer{}, fmt.Errorf("peer %q: host_mtu_bytes: %w", pe.name, err)
	}
	if pe.podMTU, err = checkMTU(in.GetPodMtuBytes()); err != nil {
		return peer{}, fmt.Errorf("peer %q: pod_mtu_bytes: %w", pe.name, err)
	}
	return pe, nil
}

// checkIP parses a peer address (protocol.ParsePeerIP, loopback with
// AllowLoopback). Empty is the zero Addr if optional.
func (p *Prober) checkIP(s string, optional bool) (netip.Addr, error) {
	if s == "" {
		if optional {
			return netip.Addr{}, nil
		}
		return netip.Addr{}, fmt.Errorf("is empty")
	}
	return protocol.ParsePeerIP(s, p.cfg.AllowLoopback)
}

// checkPort accepts 0 (none: the kind is not probed to that peer) or
// 1..65535.
func checkPort(v uint32) (uint16, error) {
	if v > 65535 {
		return 0, fmt.Errorf("%d is not a port (1..65535, or 0 for none)", v)
	}
	return uint16(v), nil
}

// checkMTU accepts 0 (unknown) or 576..65535.
func checkMTU(v uint32) (int, error) {
	if v != 0 && (v < protocol.MinMTUBytes || v > protocol.MaxMTUBytes) {
		return 0, fmt.Errorf("%d is neither 0 nor %d..%d", v, protocol.MinMTUBytes, protocol.MaxMTUBytes)
	}
	return int(v), nil
}

// enumSet checks the settings' list field of enum values: not empty,
// each valid (what says what valid is), none twice. It
// returns the values in their order; the error names the field, the
// index and the value.
func enumSet[E ~int32](field string, in []E, valid func(E) bool, what string) ([]E, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("settings.%s is empty", field)
	}
	out := make([]E, 0, len(in))
	for i, v := range in {
		if !valid(v) {
			return nil, fmt.Errorf("settings.%s[%d] %v is not %s", field, i, v, what)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("settings.%s[%d] %v is listed twice", field, i, v)
		}
		out = append(out, v)
	}
	return out, nil
}
