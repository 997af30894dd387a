package config

import (
	"errors"
	"strings"
	"testing"
)

// TestExternalConfigEdges: YAML that is not the strings and lists the
// external list is made of is refused naming the field, never read as a
// zero value; the review's address and URL refusals reach the config.
func TestExternalConfigEdges(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, wantErr string
	}{
		{"numeric address", `external: [{name: a, address: 10}]`, "external.address: a YAML number where a string is wanted; quote it"},
		{"boolean name", `external: [{name: yes, address: 192.0.2.1}]`, "external.name: a YAML bool where a string is wanted"},
		{"misspelled key", `monitor: {light: {intervall: 30s}}`, `unknown field "intervall" (keys are case-sensitive`},
		{"null address", `external: [{name: a, address: null}]`, `external[0].address: external target "a": address: "" is neither`},
		{"list for a string", `external: [{name: a, address: [192.0.2.1]}]`, "address"},
		{"map for the list", `external: {name: a, address: 192.0.2.1}`, "external"},
		{"unknown field", `external: [{name: a, address: 192.0.2.1, url: http://192.0.2.1/}]`, "url"},
		{"hex IPv4 name", `external: [{name: a, address: 0x7f.1}]`, `external[0].address`},
		{"metadata", `external: [{name: md, address: 169.254.169.254, http_url: "http://169.254.169.254/latest/meta-data/"}]`, `external[0].address: external target "md": address: 169.254.169.254 is link-local`},
		{"non-ASCII URL", "external: [{name: a, address: a.example.com, http_url: \"http://a.example.com/\u00e9\"}]", `external[0].http_url`},
		{"schedule names a target twice", "external: [{name: a, address: 192.0.2.1}]\nmonitor: {light: {interval: 30s, tests: [ping], external_targets: [a, a]}}", `external_targets[1] "a": listed twice`},
		{"schedule names an unknown target", "monitor: {light: {interval: 30s, tests: [ping], external_targets: [a]}}", `external_targets[0] "a": not in the external list`},
		{"external paths, no targets", "external: []\nmonitor: {light: {interval: 30s, tests: [ping], paths: [host-external]}}", "need external_targets"},
		{"qperf only to a target", "external: [{name: a, address: 192.0.2.1}]\nmonitor: {light: {interval: 30s, tests: [qperf_tcp_lat], paths: [host-external], external_targets: [a]}}", `tests[0] qperf_tcp_lat runs nowhere: external target "a" has no qperf_port`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse: %v, want ErrConfig with %q", err, tt.wantErr)
			}
		})
	}
}

// TestConfigYAMLTypes: a YAML 1.1 boolean or number where a string is
// wanted was converted (name: yes became the target "true", name: 0x1f
// the target "31"); it is refused, naming the field; quoted, it is the
// string it spells.
func TestConfigYAMLTypes(t *testing.T) {
	for _, v := range []string{"yes", "on", "0x1f", "010", "1_000", "1e3"} {
		_, err := Parse([]byte("external: [{name: " + v + ", address: on.example.com}]"))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "external.name") {
			t.Errorf("name: %s: %v, want ErrConfig naming external.name", v, err)
		}
	}
	s, err := Parse([]byte(`external: [{name: "yes", address: "on.example.com"}]`))
	if err != nil || len(s.External) != 1 || s.External[0].GetName() != "yes" {
		t.Errorf("quoted: %v, %v; want the target yes", s.External, err)
	}
	// A duration must be a string too (it was "30", "missing unit").
	if _, err := Parse([]byte("monitor: {light: {interval: 30, tests: [ping]}}")); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "interval") {
		t.Errorf("interval: 30: %v, want ErrConfig naming interval", err)
	}
}
