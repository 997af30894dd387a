package config

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/probe"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestParseProbes(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		check   func(t *testing.T, s *agentv1.ProbeSettings)
		wantErr string
	}{
		{"defaults", `probes: {}`, func(t *testing.T, s *agentv1.ProbeSettings) {
			if s.GetInterval().AsDuration() != 10*time.Second || s.GetReportInterval().AsDuration() != 10*time.Second ||
				s.GetTimeout().AsDuration() != 2*time.Second || len(s.GetKinds()) != 4 || len(s.GetPaths()) != 2 ||
				s.GetPayloadBytes() != 56 || s.GetMaxInFlight() != 256 || s.GetMaxPacketsPerSecond() != 2000 || s.GetSubsetRotation() != nil || s.GetIpFamilies() != nil {
				t.Errorf("defaults: %v", s)
			}
		}, ""},
		{"chosen", `probes: {interval: 10s, report_interval: 60s, timeout: 1s, kinds: [icmp, tcp], paths: [pod-service], subset_size: 50}`,
			func(t *testing.T, s *agentv1.ProbeSettings) {
				if s.GetReportInterval().AsDuration() != time.Minute || s.GetTimeout().AsDuration() != time.Second ||
					len(s.GetKinds()) != 2 || s.GetKinds()[1] != measurev1.ProbeKind_PROBE_KIND_TCP ||
					s.GetPaths()[0] != measurev1.Path_PATH_POD_TO_SERVICE || s.GetSubsetSize() != 50 ||
					s.GetSubsetRotation().AsDuration() != 100*time.Second {
					t.Errorf("chosen: %v", s)
				}
			}, ""},
		{"short timeout default", `probes: {interval: 1s}`, func(t *testing.T, s *agentv1.ProbeSettings) {
			if s.GetTimeout().AsDuration() != 500*time.Millisecond {
				t.Errorf("timeout %v, want 500ms (half the interval)", s.GetTimeout().AsDuration())
			}
		}, ""},
		{"ipv4 default", `probes: {ip_families: [ipv4]}`, func(t *testing.T, s *agentv1.ProbeSettings) {
			if s.GetIpFamilies() != nil {
				t.Errorf("ip_families %v, want none (IPv4 only, as before families)", s.GetIpFamilies())
			}
		}, ""},
		{"dual", `probes: {ip_families: [ipv4, ipv6]}`, func(t *testing.T, s *agentv1.ProbeSettings) {
			if f := s.GetIpFamilies(); len(f) != 2 || f[0] != measurev1.IPFamily_IP_FAMILY_IPV4 || f[1] != measurev1.IPFamily_IP_FAMILY_IPV6 {
				t.Errorf("ip_families %v, want [IPV4 IPV6]", f)
			}
		}, ""},
		{"ipv6 only", `probes: {ip_families: [ipv6]}`, func(t *testing.T, s *agentv1.ProbeSettings) {
			if f := s.GetIpFamilies(); len(f) != 1 || f[0] != measurev1.IPFamily_IP_FAMILY_IPV6 {
				t.Errorf("ip_families %v, want [IPV6]", f)
			}
		}, ""},
		{"unknown family", `probes: {ip_families: [ipv4, ipx]}`, nil, `probes.ip_families[1] "ipx": not an IP family`},
		{"family twice", `probes: {ip_families: [ipv6, ipv6]}`, nil, `probes.ip_families[1] "ipv6": listed twice`},
		{"interval too short", `probes: {interval: 500ms}`, nil, `probes.interval "500ms"`},
		{"report not a multiple", `probes: {interval: 10s, report_interval: 15s}`, nil, `probes.report_interval "15s"`},
		{"report under interval", `probes: {interval: 10s, report_interval: 5s}`, nil, `probes.report_interval "5s"`},
		{"timeout at interval", `probes: {interval: 2s, timeout: 2s}`, nil, `probes.timeout "2s"`},
		{"unknown kind", `probes: {kinds: [icmp, udp]}`, nil, `probes.kinds[1] "udp"`},
		{"kind twice", `probes: {kinds: [tcp, tcp]}`, nil, `probes.kinds[1] "tcp": listed twice`},
		{"external path", `probes: {paths: [host-external]}`, nil, `probes.paths[0] "host-external"`},
		{"unknown path", `probes: {paths: [pod-moon]}`, nil, `probes.paths[0]`},
		{"payload", `probes: {payload_bytes: 70000}`, nil, `probes.payload_bytes 70000`},
		{"pps", `probes: {max_packets_per_second: 1000000}`, nil, `probes.max_packets_per_second 1000000`},
		{"rotation", `probes: {interval: 10s, subset_size: 5, subset_rotation: 1s}`, nil, `probes.subset_rotation "1s"`},
		{"rotation without subset", `probes: {subset_rotation: 1m}`, nil, `probes.subset_rotation "1m": needs subset_size`},
		{"rotation over a day", `probes: {subset_size: 5, subset_rotation: 25h}`, nil, `probes.subset_rotation "25h"`},
		{"subset over the plan's peers", `probes: {subset_size: 10001}`, nil, `probes.subset_size 10001: at most 10000`},
		{"timeout under a millisecond", `probes: {timeout: 500us}`, nil, `probes.timeout "500us"`},
		{"interval too long", `probes: {interval: 61m}`, nil, `probes.interval "61m"`},
		{"report over a day", `probes: {interval: 1h, report_interval: 25h}`, nil, `probes.report_interval "25h"`},
		{"in flight", `probes: {max_in_flight: 4097}`, nil, `probes.max_in_flight 4097`},
		{"typo", `probes: {intervall: 10s}`, nil, `unknown field "intervall"`},
		{"bad duration", `probes: {interval: ten}`, nil, `probes.interval "ten"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settings, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, settings.Probes)
		})
	}
	if s, err := Parse([]byte(`monitor: {}`)); err != nil || s.Probes != nil {
		t.Errorf("no probes section: %v, %v; want nil settings", s.Probes, err)
	}
}

// TestProbeSettingsTakenByAgents checks that what the config makes of the
// probes section, the example config's, the defaults and every bound at
// its limit, is a plan an agent's prober accepts (TestParseProbes has
// the config refuse each bound's next value).
func TestProbeSettingsTakenByAgents(t *testing.T) {
	example, err := Load(filepath.Join("..", "..", "deploy", "config", "coordinator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{`probes: {}`, `probes: {interval: 1s}`, `probes: {report_interval: 60s, subset_size: 10}`, "",
		`probes: {interval: 1h, report_interval: 24h, timeout: 1ms}`, `probes: {interval: 1s, timeout: 999ms}`,
		`probes: {subset_size: 10000, subset_rotation: 24h}`, `probes: {interval: 1h, subset_size: 1, subset_rotation: 1h}`,
		`probes: {payload_bytes: 65000, max_in_flight: 4096, max_packets_per_second: 100000}`,
		`probes: {payload_bytes: 1, max_in_flight: 1, max_packets_per_second: 1}`} {
		settings := example.Probes
		if y != "" {
			s, err := Parse([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			settings = s.Probes
		}
		p, err := probe.New(probe.Config{Node: "node-1", Host: probe.Network{Net: measurev1.Network_NETWORK_HOST, IP: netip.MustParseAddr("10.0.0.1")},
			Report: func(*agentv1.ProbeReport) {}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Settings: settings}); err != nil {
			t.Errorf("%q: the agent refuses the settings %v: %v", y, settings, err)
		}
	}
}
