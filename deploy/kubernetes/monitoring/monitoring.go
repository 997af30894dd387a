package monitoring

import (
	_ "embed" // the component's files
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// PrometheusRule is prometheusrule.yaml: the PrometheusRule object whose
// spec.groups are meshperf's alerting rules.
//
//go:embed prometheusrule.yaml
var PrometheusRule []byte

// Dashboard is meshperf-dashboard.json: the Grafana dashboard (JSON
// model, schemaVersion 39).
//
//go:embed meshperf-dashboard.json
var Dashboard []byte

// ErrNoRules means a PrometheusRule has no spec.groups.
var ErrNoRules = errors.New("no rule groups")

// Rules returns the rule groups of the PrometheusRule manifest pr (one YAML
// document, e.g. PrometheusRule) as a Prometheus rules file,
// "groups: [...]", that promtool and Prometheus's rule_files read. Errors
// name the field: YAML that does not parse, a kind other than
// PrometheusRule, or no spec.groups (ErrNoRules).
func Rules(pr []byte) ([]byte, error) {
	var obj struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []json.RawMessage `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(pr, &obj); err != nil {
		return nil, fmt.Errorf("monitoring: PrometheusRule: %w", err)
	}
	if obj.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("monitoring: kind %q: want PrometheusRule", obj.Kind)
	}
	if len(obj.Spec.Groups) == 0 {
		return nil, fmt.Errorf("monitoring: spec.groups: %w", ErrNoRules)
	}
	out, err := yaml.Marshal(map[string]any{"groups": obj.Spec.Groups})
	if err != nil {
		return nil, fmt.Errorf("monitoring: rules file: %w", err)
	}
	return out, nil
}

// Query is one PromQL expression of a dashboard.
type Query struct {
	// Where names it: "panel <id> <title> target <refId>", or
	// "variable <name>".
	Where string
	// Expr is the PromQL expression as written, with the dashboard's
	// template variables ($test, $__rate_interval, ...) unexpanded; a
	// variable's label_values(selector, label) query is given as its
	// selector.
	Expr string
}

// labelValues matches a Grafana variable query label_values(selector,
// label) and captures the selector.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// Queries returns every PromQL expression of the Grafana dashboard d (its
// JSON model, e.g. Dashboard): each panel's targets[].expr, nested rows'
// panels included, and each query variable's query. Errors name the
// panel or variable: JSON that does not parse, a target without expr, or
// a variable query that is neither PromQL nor label_values(selector,
// label).
func Queries(d []byte) ([]Query, error) {
	type panel struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(d, &dash); err != nil {
		return nil, fmt.Errorf("monitoring: dashboard: %w", err)
	}
	var out []Query
	var walk func(raw []json.RawMessage) error
	walk = func(raw []json.RawMessage) error {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				return fmt.Errorf("monitoring: dashboard panel: %w", err)
			}
			for _, t := range p.Targets {
				where := fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, t.RefID)
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("monitoring: dashboard %s: no expr", where)
				}
				out = append(out, Query{Where: where, Expr: t.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dash.Panels); err != nil {
		return nil, err
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Query)
		if err != nil {
			return nil, fmt.Errorf("monitoring: dashboard variable %q: %w", v.Name, err)
		}
		out = append(out, Query{Where: "variable " + v.Name, Expr: q})
	}
	return out, nil
}

// variableQuery is the PromQL of a query variable's query, a string or
// {"query": string}.
func variableQuery(raw json.RawMessage) (string, error) {
	var q string
	if err := json.Unmarshal(raw, &q); err != nil {
		var obj struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return "", fmt.Errorf("query %s: want a string or {\"query\": string}", raw)
		}
		q = obj.Query
	}
	if strings.TrimSpace(q) == "" {
		return "", errors.New("query is empty")
	}
	if strings.HasPrefix(strings.TrimSpace(q), "label_values(") {
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return "", fmt.Errorf("query %q: want label_values(selector, label)", q)
		}
		return m[1], nil
	}
	if strings.Contains(q, "label_names(") || strings.Contains(q, "metrics(") || strings.Contains(q, "query_result(") {
		return "", fmt.Errorf("query %q: only label_values(selector, label) or PromQL", q)
	}
	return q, nil
}

// variable matches a Grafana template variable: $name, ${name} or
// [[name]].
var variable = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]`)

// Expand replaces each template variable in expr with its value in vars
// and returns the result. It fails naming the variables vars lacks, so
// that an expression is never run with a variable left in it.
func Expand(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := variable.ReplaceAllStringFunc(expr, func(s string) string {
		m := variable.FindStringSubmatch(s)
		name := m[1] + m[2] + m[3]
		v, ok := vars[name]
		if !ok {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return s
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("monitoring: expression %q: no value for variable(s) %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}
