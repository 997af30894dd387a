package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server ports of an external target reach the allowlist; a bad one
// is refused naming external[i], the field and its value.
func TestParseExternalPorts(t *testing.T) {
	tests := []struct {
		name                 string
		yaml                 string
		wantErr              string
		wantIperf3, wantQp   uint32
		wantQpData           uint32
		wantLightExternalRun bool
	}{
		{"all ports", `external: [{name: lb, address: 192.0.2.1, iperf3_port: 5201, qperf_port: 19765, qperf_data_port: 19766}]`,
			"", 5201, 19765, 19766, false},
		{"iperf3 only", `external: [{name: lb, address: 192.0.2.1, iperf3_port: 15201}]`, "", 15201, 0, 0, false},
		{"a schedule of iperf3 to it", `external: [{name: lb, address: 192.0.2.1, iperf3_port: 5201}]
monitor: {bandwidth: {interval: 6h, tests: [iperf3_tcp], paths: [host-external], external_targets: [lb]}}`, "", 5201, 0, 0, true},
		{"a schedule of iperf3 to a target without its port", `external: [{name: lb, address: 192.0.2.1, qperf_port: 1, qperf_data_port: 2}]
monitor: {bandwidth: {interval: 6h, tests: [iperf3_tcp], paths: [host-external], external_targets: [lb]}}`,
			`monitor.bandwidth.tests and paths`, 0, 0, 0, false},
		{"iperf3 port too big", `external: [{name: lb, address: 192.0.2.1}, {name: b, address: 192.0.2.2, iperf3_port: 65536}]`,
			`external[1].iperf3_port: external target "b": iperf3_port 65536: want a port in 1..65535`, 0, 0, 0, false},
		{"qperf without data port", `external: [{name: lb, address: 192.0.2.1, qperf_port: 19765}]`,
			`external[0].qperf_data_port: external target "lb": qperf_data_port 0: qperf_port 19765 needs a qperf_data_port`, 0, 0, 0, false},
		{"data port without qperf", `external: [{name: lb, address: 192.0.2.1, qperf_data_port: 19766}]`,
			`external[0].qperf_port: external target "lb": qperf_port 0: qperf_data_port 19766 needs a qperf_port`, 0, 0, 0, false},
		{"shared port", `external: [{name: lb, address: 192.0.2.1, iperf3_port: 19766, qperf_port: 19765, qperf_data_port: 19766}]`,
			`external[0].qperf_data_port: external target "lb": qperf_data_port 19766: already the iperf3_port`, 0, 0, 0, false},
		{"negative", `external: [{name: lb, address: 192.0.2.1, iperf3_port: -1}]`, `iperf3_port: a YAML number -1 where a uint32 is wanted`, 0, 0, 0, false},
		{"text", `external: [{name: lb, address: 192.0.2.1, qperf_port: "x"}]`, `qperf_port: a YAML string`, 0, 0, 0, false},
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
			e := settings.External[0]
			if e.GetIperf3Port() != tt.wantIperf3 || e.GetQperfPort() != tt.wantQp || e.GetQperfDataPort() != tt.wantQpData {
				t.Errorf("ports %d %d %d, want %d %d %d", e.GetIperf3Port(), e.GetQperfPort(), e.GetQperfDataPort(),
					tt.wantIperf3, tt.wantQp, tt.wantQpData)
			}
			if got := len(settings.Plans) > 0; got != tt.wantLightExternalRun {
				t.Errorf("plans %v, want a plan: %v", settings.Plans, tt.wantLightExternalRun)
			}
		})
	}
}

// The commented external example of deploy/config/coordinator.yaml parses
// once uncommented, with the server ports of its second target.
func TestExampleExternalServers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "config", "coordinator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "# external:" {
			block = append(block, "external:")
			continue
		}
		if len(block) == 0 {
			continue
		}
		if !strings.HasPrefix(line, "#   ") {
			break
		}
		block = append(block, strings.TrimPrefix(line, "# "))
	}
	settings, err := Parse([]byte(strings.Join(block, "\n")))
	if err != nil {
		t.Fatalf("the example %q: %v", block, err)
	}
	if len(settings.External) != 2 || settings.External[1].GetIperf3Port() == 0 || settings.External[1].GetQperfDataPort() == 0 {
		t.Errorf("the example's targets %v, want a second one with iperf3 and qperf ports", settings.External)
	}
}
