package config

import (
	"errors"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testspec"
)

// FuzzParse: any input is refused with ErrConfig or gives settings the
// rest of the coordinator can take: schedules within their bounds whose
// tests the coordinator accepts, probe settings with a timeout under the
// interval.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"monitor: {light: {interval: 30s, jitter: 5s, tests: [ping, qperf_tcp_lat], duration: 1s}}",
		"monitor: {bandwidth: {interval: 6h, tests: [iperf3_tcp, qperf_tcp_bw], sweep: true, repeats: 2}}",
		"external: [{name: lb, address: 192.0.2.1, iperf3_port: 5201, qperf_port: 19765, qperf_data_port: 19766}]\n" +
			"monitor: {light: {interval: 30s, tests: [ping, iperf3_tcp], paths: [host-external], external_targets: [lb]}}",
		"probes: {interval: 10s, report_interval: 60s, kinds: [icmp, tcp], subset_size: 5, ip_families: [ipv4, ipv6]}",
		"node_cidrs: [10.0.0.0/16, fd00::/64]\npod_cidrs: [10.244.0.0/16]",
		`{"monitor": {"light": {"interval": "5s", "tests": ["http"]}}}`,
		"external: [{name: yes, address: 10}]",
		"monitor: {light: {interval: 30s, tests: [ping], jitter: 14s}}",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		for _, p := range s.Plans {
			if p.Interval < minInterval || p.Jitter < 0 || p.Jitter >= p.Interval/2 || len(p.Spec.GetTests()) == 0 {
				t.Fatalf("plan %s: interval %v, jitter %v, %d tests", p.Name, p.Interval, p.Jitter, len(p.Spec.GetTests()))
			}
			for _, ts := range p.Spec.GetTests() {
				if _, err := testspec.Normalize(ts); err != nil {
					t.Fatalf("plan %s: a test the coordinator refuses: %v", p.Name, err)
				}
			}
		}
		if pr := s.Probes; pr != nil {
			if iv, to := pr.GetInterval().AsDuration(), pr.GetTimeout().AsDuration(); iv < time.Second || to <= 0 || to >= iv {
				t.Fatalf("probes: interval %v, timeout %v", iv, to)
			}
		}
	})
}

// FuzzBuildRunSpec: any test, path, size and family names are refused with
// an error or built into tests the coordinator accepts.
func FuzzBuildRunSpec(f *testing.F) {
	f.Add("ping", "host-host", "64", "", uint32(0), int64(0), false)
	f.Add("qperf_tcp_bw", "pod-pod", "1K", "dual", uint32(3), int64(time.Second), true)
	f.Add("iperf3_udp", "pod-service", "2Mi", "ipv6", uint32(0), int64(1500*time.Millisecond), false)
	f.Add("http_load", "nowhere", "0", "ipv5", uint32(1<<20), int64(-1), true)
	f.Fuzz(func(t *testing.T, test, path, size, family string, count uint32, dur int64, strict bool) {
		in := RunInput{Tests: []string{test}, Paths: []string{path}, MsgSizes: []string{size}, BlockSizes: []string{size},
			IPFamily: family, PingCount: count, Duration: time.Duration(dur), Strict: strict}
		spec, err := BuildRunSpec(in, allNames)
		if err != nil {
			return
		}
		for _, ts := range spec.GetTests() {
			if _, err := testspec.Normalize(ts); err != nil {
				t.Fatalf("built a test the coordinator refuses: %v", err)
			}
		}
		if len(spec.GetTests()) == 0 || len(spec.GetPaths()) != 1 {
			t.Fatalf("spec %v: want the test and the path", spec)
		}
	})
}
