package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/deploy/kubernetes/monitoring"
)

// sampleVars are values for the dashboard's template variables, Grafana's
// own included, that make each expression plain PromQL.
var sampleVars = map[string]string{
	"test": "ping", "path": "pod-pod", "src": "node-1", "dst": "node-2",
	"__rate_interval": "1m", "__interval": "30s", "datasource": "prometheus",
}

// expandedQueries is every dashboard query with sampleVars filled in.
func expandedQueries(t *testing.T, vars map[string]string) []monitoring.Query {
	t.Helper()
	qs, err := monitoring.Queries(monitoring.Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	for i := range qs {
		e, err := monitoring.Expand(qs[i].Expr, vars)
		if err != nil {
			t.Fatalf("%s: %v", qs[i].Where, err)
		}
		qs[i].Expr = e
	}
	return qs
}

// asRecordingRules writes qs as one recording rule each, so that promtool
// check rules parses every expression.
func asRecordingRules(t *testing.T, qs []monitoring.Query) []byte {
	t.Helper()
	var rules []rule
	for i, q := range qs {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: q.Expr})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDashboardQueriesParse(t *testing.T) {
	promtool(t)
	qs := expandedQueries(t, sampleVars)
	tests := []struct {
		name   string
		edit   func([]monitoring.Query)
		wantOK bool
	}{
		{"as written", func([]monitoring.Query) {}, true},
		{"one broken", func(qs []monitoring.Query) { qs[len(qs)/2].Expr += ")" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			qs := append([]monitoring.Query(nil), qs...)
			tt.edit(qs)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "dashboard.yaml"), asRecordingRules(t, qs), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := runPromtool(t, dir, "check", "rules", "dashboard.yaml")
			if (err == nil) != tt.wantOK {
				t.Errorf("promtool check rules: %v, want ok %v\n%s", err, tt.wantOK, out)
			}
		})
	}
}

// TestDashboardShowsWhatIsAsked checks the dashboard has a query for each
// thing the mesh and pair pages show, and only metrics the coordinator
// exports (coordinator/metrics documents every one).
func TestDashboardShowsWhatIsAsked(t *testing.T) {
	qs, err := monitoring.Queries(monitoring.Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, q := range qs {
		all.WriteString(q.Expr + "\n")
	}
	for _, want := range []string{
		`meshperf_pair_latency_seconds{test="$test", path="$path"}`, // the matrix
		`path="host-host"`,                // the baseline
		"meshperf_pair_loss_ratio",        // pair loss
		"meshperf_fault",                  // findings
		"meshperf_probe_fault",            // the probes' findings
		`status!="ok"`,                    // status
		`src="$src", dst="$dst"`,          // the pair page
		"quantile_over_time(0.9",          // its p90 band
		"meshperf_node_loss_ratio",        // node loss
		"meshperf_agents_connected",       // agents
		"meshperf_results_ingested_total", // ingest
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no dashboard query has %q", want)
		}
	}
	documented, err := os.ReadFile(filepath.Join("..", "..", "..", "coordinator", "metrics", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	probes, err := os.ReadFile(filepath.Join("..", "..", "..", "coordinator", "metrics", "probes.go"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := monitoring.Rules(monitoring.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`meshperf_[a-z_]+`)
	for _, n := range name.FindAllString(all.String()+string(rules), -1) {
		if !strings.Contains(string(documented)+string(probes), `"`+n+`"`) && !regexp.MustCompile(`\b`+n+`\b`).Match(documented) {
			t.Errorf("%s: not a metric coordinator/metrics exports", n)
		}
	}
}

func TestQueriesAndExpandRefuseBadInput(t *testing.T) {
	tests := []struct {
		name, dashboard, want string
	}{
		{"not JSON", "{", "dashboard"},
		{"target without expr", `{"panels": [{"id": 3, "title": "x", "targets": [{"refId": "A"}]}]}`, `panel 3 "x" target A: no expr`},
		{"nested target without expr", `{"panels": [{"type": "row", "panels": [{"id": 4, "targets": [{"refId": "B", "expr": " "}]}]}]}`, "panel 4"},
		{"variable of another kind", `{"templating": {"list": [{"name": "v", "type": "query", "query": "label_names()"}]}}`, `variable "v"`},
		{"label_values without a label", `{"templating": {"list": [{"name": "v", "type": "query", "query": {"query": "label_values(up)"}}]}}`, "label_values(selector, label)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := monitoring.Queries([]byte(tt.dashboard))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Queries = %v, want an error with %q", err, tt.want)
			}
		})
	}
	if _, err := monitoring.Expand(`up{a="$a", b="${b}"}`, map[string]string{"a": "1"}); err == nil || !strings.Contains(err.Error(), "b") {
		t.Errorf("Expand with $b missing = %v, want an error naming b", err)
	}
	if got, err := monitoring.Expand(`x{a="$a", b="${b}"} [[a]] "$1"`, map[string]string{"a": "1", "b": "2"}); err != nil || got != `x{a="1", b="2"} 1 "$1"` {
		t.Errorf("Expand = %q, %v", got, err)
	}
}

func TestQueriesReadsVariables(t *testing.T) {
	qs, err := monitoring.Queries(monitoring.Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(monitoring.Dashboard, &d); err != nil {
		t.Fatal(err)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		found := false
		for _, q := range qs {
			if q.Where == "variable "+v.Name {
				found = true
				if strings.Contains(q.Expr, "label_values") {
					t.Errorf("variable %s: query %q still has label_values", v.Name, q.Expr)
				}
			}
		}
		if !found {
			t.Errorf("variable %s: no query", v.Name)
		}
	}
}
