package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestParseExternal(t *testing.T) {
	const list = `
external:
  - {name: ingress, address: 203.0.113.10, http_url: "http://203.0.113.10/healthz"}
  - {name: other, address: node-1.other.example.com}
`
	tooMany := "external:\n"
	for i := range protocol.MaxExternalTargets + 1 {
		tooMany += fmt.Sprintf("  - {name: t%d, address: 192.0.2.1}\n", i)
	}
	tests := []struct {
		name      string
		yaml      string
		wantErr   string
		wantNames []string // the light schedule's external_targets
	}{
		{"list only", list, "", nil},
		{"schedule names targets", list + `monitor: {light: {interval: 30s, tests: [ping, http], paths: [host-host, pod-external], external_targets: [other, ingress]}}`,
			"", []string{"other", "ingress"}},
		{"default paths take both external paths", list + `monitor: {light: {interval: 30s, tests: [ping], external_targets: [other]}}`, "", []string{"other"}},
		{"bad name", `external: [{name: Ingress, address: 203.0.113.10}]`, `external[0].name`, nil},
		{"bad address", `external: [{name: a, address: "not an address!"}, {name: b, address: 192.0.2.1}]`, `external[0].address`, nil},
		{"url host is not the address", `external: [{name: a, address: 192.0.2.1}, {name: b, address: 192.0.2.2, http_url: "http://192.0.2.3/"}]`,
			`external[1].http_url`, nil},
		{"url scheme", `external: [{name: a, address: 192.0.2.1, http_url: "ftp://192.0.2.1/"}]`, `external[0].http_url`, nil},
		{"duplicate name", `external: [{name: a, address: 192.0.2.1}, {name: a, address: 192.0.2.2}]`, `external[1].name "a": already the name of external[0]`, nil},
		{"too many", tooMany, fmt.Sprintf("at most %d", protocol.MaxExternalTargets), nil},
		{"typo", `external: [{name: a, adress: 192.0.2.1}]`, `unknown field "adress"`, nil},
		{"unknown target", list + `monitor: {light: {interval: 30s, tests: [ping], external_targets: [ingres]}}`,
			`monitor.light.external_targets[0] "ingres": not in the external list`, nil},
		{"target twice", list + `monitor: {light: {interval: 30s, tests: [ping], external_targets: [other, other]}}`,
			`monitor.light.external_targets[1] "other": listed twice`, nil},
		{"targets without an external path", list + `monitor: {light: {interval: 30s, tests: [ping], paths: [host-host], external_targets: [other]}}`,
			`monitor.light.external_targets [other]: paths has no host-external or pod-external`, nil},
		{"external path without targets", list + `monitor: {light: {interval: 30s, tests: [ping], paths: [host-external]}}`,
			`monitor.light.paths: host-external and pod-external need external_targets`, nil},
		{"no test applies", list + `monitor: {light: {interval: 30s, tests: [qperf_tcp_lat], paths: [host-external], external_targets: [ingress]}}`,
			`monitor.light.tests and paths`, nil},
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
			if len(settings.External) != 2 || settings.External[0].GetName() != "ingress" ||
				settings.External[0].GetHttpUrl() != "http://203.0.113.10/healthz" || settings.External[1].GetAddress() != "node-1.other.example.com" {
				t.Errorf("external = %v", settings.External)
			}
			var got []string
			if len(settings.Plans) > 0 {
				got = settings.Plans[0].Spec.GetExternalTargets()
			}
			if !slices.Equal(got, tt.wantNames) {
				t.Errorf("external_targets = %v, want %v", got, tt.wantNames)
			}
		})
	}
}

// A schedule's external_targets reach its RunSpec with its paths as given.
func TestParseExternalSpec(t *testing.T) {
	settings, err := Parse([]byte(`
external: [{name: lb, address: 192.0.2.7}]
monitor: {light: {interval: 30s, tests: [ping], paths: [host-external, pod-external], external_targets: [lb]}}`))
	if err != nil {
		t.Fatal(err)
	}
	spec := settings.Plans[0].Spec
	want := []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL}
	if !slices.Equal(spec.GetPaths(), want) || !slices.Equal(spec.GetExternalTargets(), []string{"lb"}) {
		t.Errorf("spec = %v", spec)
	}
}
