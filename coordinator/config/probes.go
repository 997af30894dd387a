package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// settings checks the section and turns it into the ProbeSettings every
// agent's plan carries; errors name the field (under "probes.") and value.
func (p *Probes) settings() (*agentv1.ProbeSettings, error) {
	dur := func(field, s string, def time.Duration) (time.Duration, error) {
		if s == "" {
			return def, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", field, s, err)
		}
		return d, nil
	}
	interval, err := dur("interval", p.Interval, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if interval < protocol.ProbeMinInterval || interval > protocol.ProbeMaxInterval {
		return nil, fmt.Errorf("interval %q: want %v to %v", p.Interval, protocol.ProbeMinInterval, protocol.ProbeMaxInterval)
	}
	report, err := dur("report_interval", p.ReportInterval, interval)
	if err != nil {
		return nil, err
	}
	if report < interval || report%interval != 0 || report > protocol.ProbeMaxReportInterval {
		return nil, fmt.Errorf("report_interval %q: want a whole multiple of the interval %v, at most %v", p.ReportInterval, interval, protocol.ProbeMaxReportInterval)
	}
	timeout, err := dur("timeout", p.Timeout, min(2*time.Second, interval/2))
	if err != nil {
		return nil, err
	}
	if timeout < protocol.ProbeMinTimeout || timeout >= interval {
		return nil, fmt.Errorf("timeout %q: want %v or more, and less than the interval %v", p.Timeout, protocol.ProbeMinTimeout, interval)
	}
	rotation, err := dur("subset_rotation", p.SubsetRotation, 10*interval)
	if err != nil {
		return nil, err
	}
	if rotation < interval || rotation > protocol.ProbeMaxReportInterval {
		return nil, fmt.Errorf("subset_rotation %q: want at least the interval %v, at most %v", p.SubsetRotation, interval, protocol.ProbeMaxReportInterval)
	}
	s := &agentv1.ProbeSettings{
		Interval: durationpb.New(interval), ReportInterval: durationpb.New(report), Timeout: durationpb.New(timeout),
		PayloadBytes: p.PayloadBytes, MaxInFlight: p.MaxInFlight, MaxPacketsPerSecond: p.MaxPacketsPerSecond,
		SubsetSize: p.SubsetSize,
	}
	if p.SubsetSize > protocol.ProbeMaxPeers {
		return nil, fmt.Errorf("subset_size %d: at most %d", p.SubsetSize, protocol.ProbeMaxPeers)
	}
	if p.SubsetSize > 0 { // a rotation without a subset is refused by the agents
		s.SubsetRotation = durationpb.New(rotation)
	} else if p.SubsetRotation != "" {
		return nil, fmt.Errorf("subset_rotation %q: needs subset_size", p.SubsetRotation)
	}
	allKinds := testspec.ProbeKinds()
	kindNames := make([]string, len(allKinds))
	for i, k := range allKinds {
		kindNames[i] = testspec.ProbeKindName(k)
	}
	kinds := p.Kinds
	if len(kinds) == 0 {
		kinds = kindNames
	}
	if s.Kinds, err = parseNames("kinds", kinds, known("kinds", testspec.ParseProbeKind, "a probe kind ("+strings.Join(kindNames, ", ")+")")); err != nil {
		return nil, err
	}
	paths := p.Paths
	if len(paths) == 0 {
		paths = []string{"host-host", "pod-pod"}
	}
	if s.Paths, err = parseNames("paths", paths, func(i int, name string) (measurev1.Path, error) {
		path, err := testspec.ParsePath(name)
		if err != nil {
			return path, fmt.Errorf("paths[%d]: %w", i, err)
		}
		if !testspec.IsProbePath(path) {
			return path, fmt.Errorf("paths[%d] %q: the probes take %s", i, name, strings.Join(testspec.PathNamesOf(testspec.ProbePaths()), ", "))
		}
		return path, nil
	}); err != nil {
		return nil, err
	}
	familyNames := make([]string, len(protocol.Families))
	for i, f := range protocol.Families {
		familyNames[i] = protocol.FamilyName(f)
	}
	if s.IpFamilies, err = parseNames("ip_families", p.IPFamilies, known("ip_families", protocol.ParseFamilyName, "an IP family ("+strings.Join(familyNames, ", ")+")")); err != nil {
		return nil, err
	}
	if len(s.IpFamilies) == 1 && s.IpFamilies[0] == measurev1.IPFamily_IP_FAMILY_IPV4 {
		s.IpFamilies = nil // the default: plans as before families existed
	}
	if s.PayloadBytes == 0 {
		s.PayloadBytes = 56
	}
	if s.PayloadBytes > protocol.ProbeMaxPayloadBytes {
		return nil, fmt.Errorf("payload_bytes %d: at most %d", s.PayloadBytes, protocol.ProbeMaxPayloadBytes)
	}
	if s.MaxInFlight == 0 {
		s.MaxInFlight = 256
	}
	if s.MaxInFlight > protocol.ProbeMaxInFlight {
		return nil, fmt.Errorf("max_in_flight %d: at most %d", s.MaxInFlight, protocol.ProbeMaxInFlight)
	}
	if s.MaxPacketsPerSecond == 0 {
		s.MaxPacketsPerSecond = 2000
	}
	if s.MaxPacketsPerSecond > protocol.ProbeMaxPacketsPerSecond {
		return nil, fmt.Errorf("max_packets_per_second %d: at most %d", s.MaxPacketsPerSecond, protocol.ProbeMaxPacketsPerSecond)
	}
	return s, nil
}

// known is a parseNames parse of the names parse knows (a name table's
// inverse); any other name is refused as not want, e.g. "a probe kind
// (icmp, ...)", with the field, the index and the name.
func known[T any](field string, parse func(string) (T, bool), want string) func(int, string) (T, error) {
	return func(i int, name string) (T, error) {
		v, ok := parse(name)
		if !ok {
			return v, fmt.Errorf("%s[%d] %q: not %s", field, i, name, want)
		}
		return v, nil
	}
}

// parseNames turns the names of the list field field into values with
// parse, which names the field, the index and the name in its errors,
// and refuses a name whose value is listed twice. No names give nil.
func parseNames[T comparable](field string, names []string, parse func(i int, name string) (T, error)) ([]T, error) {
	var out []T
	for i, name := range names {
		v, err := parse(i, name)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%s[%d] %q: listed twice", field, i, name)
		}
		out = append(out, v)
	}
	return out, nil
}
