package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    int // plans
		wantErr string
	}{
		{"both schedules", `
monitor:
  light: {interval: 30s, jitter: 5s, tests: [ping, qperf_tcp_lat], paths: [host-host, pod-pod], duration: 1s}
  bandwidth: {interval: 6h, tests: [iperf3_tcp, qperf_tcp_bw], sweep: true, mesh_rounds: 40}
`, 2, ""},
		{"none", `monitor: {}`, 0, ""},
		{"typo is refused", `monitor: {light: {interval: 30s, tests: [ping], jiter: 1s}}`, 0, `unknown field "jiter"`},
		{"interval too short", `monitor: {light: {interval: 1s, tests: [ping]}}`, 0, `monitor.light.interval "1s"`},
		{"jitter too large", `monitor: {light: {interval: 30s, jitter: 20s, tests: [ping]}}`, 0, `monitor.light.jitter "20s"`},
		{"unknown test", `monitor: {bandwidth: {interval: 1h, tests: [iperf2]}}`, 0, "monitor.bandwidth.tests[0]"},
		{"bad duration", `monitor: {bandwidth: {interval: 1h, tests: [iperf3_tcp], duration: 1.5s}}`, 0, "monitor.bandwidth.tests[0] iperf3_tcp"},
		{"no tests", `monitor: {light: {interval: 1m}}`, 0, "monitor.light.tests: empty"},
		{"mesh_rounds too few", `monitor: {bandwidth: {interval: 1h, tests: [iperf3_tcp], mesh_rounds: 3}}`, 0, "monitor.bandwidth.mesh_rounds 3"},
		{"mesh_rounds too many", `monitor: {bandwidth: {interval: 1h, tests: [iperf3_tcp], mesh_rounds: 10001}}`, 0, "monitor.bandwidth.mesh_rounds 10001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settings, err := Parse([]byte(tt.yaml))
			plans := settings.Plans
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(plans) != tt.want {
				t.Fatalf("%d plans, want %d", len(plans), tt.want)
			}
		})
	}
	settings, _ := Parse([]byte(tests[0].yaml))
	light, bw := settings.Plans[0], settings.Plans[1]
	if light.Interval != 30*time.Second || light.Jitter != 5*time.Second || light.Spec.GetLabel() != "monitor-light" || len(light.Spec.GetPaths()) != 2 {
		t.Errorf("light plan %+v", light)
	}
	if got := len(bw.Spec.GetTests()[1].GetQperf().GetMsgSizeBytes()); got != 11 || bw.Jitter != time.Hour || bw.Spec.GetMeshRounds() != 40 {
		t.Errorf("bandwidth plan: %d sweep sizes (want 11), jitter %v (want 1h, a sixth of 6h), mesh_rounds %d (want 40)", got, bw.Jitter, bw.Spec.GetMeshRounds())
	}
	if light.Spec.GetMeshRounds() != 0 {
		t.Errorf("light plan: mesh_rounds %d, want 0 (the full mesh)", light.Spec.GetMeshRounds())
	}
}

// The example shipped in deploy/config parses.
func TestExampleConfig(t *testing.T) {
	settings, err := Load(filepath.Join("..", "..", "deploy", "config", "coordinator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(settings.Plans) != 1 || settings.Plans[0].Name != "bandwidth" {
		t.Errorf("%d plans, want bandwidth only (the continuous latency mesh is the probes)", len(settings.Plans))
	}
	if settings.Probes == nil || len(settings.Probes.GetKinds()) != 4 {
		t.Errorf("probes %v, want the four kinds", settings.Probes)
	}
}
