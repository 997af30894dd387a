package monitoring_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/deploy/kubernetes/monitoring"
)

// wantAlerts are the alerts the rules must hold, each with a severity.
var wantAlerts = map[string]string{
	"MeshperfNodeFault":     "critical",
	"MeshperfPartition":     "critical",
	"MeshperfAgentsMissing": "warning",
	"MeshperfNodeLoss":      "warning",
	"MeshperfPairLoss":      "warning",
	"MeshperfNotIngesting":  "critical",
	"MeshperfAbsent":        "critical",
}

// rule is one rule of a rules file.
type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// rulesFile is a Prometheus rules file.
type rulesFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

func parseRules(t *testing.T, b []byte) rulesFile {
	t.Helper()
	var f rulesFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("rules file: %v\n%s", err, b)
	}
	return f
}

// promtool returns the path of promtool, skipping the test if it is not
// installed (make test-deps installs Debian's prometheus package).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("missing tool: promtool (make test-deps)")
	}
	return p
}

// runPromtool runs promtool with args in dir, in its own process group
// with a timeout, and returns its output and error.
func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestRulesHoldEveryAlert(t *testing.T) {
	b, err := monitoring.Rules(monitoring.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	f := parseRules(t, b)
	got := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			got[r.Alert] = true
			want, ok := wantAlerts[r.Alert]
			if !ok {
				t.Errorf("alert %q: not in wantAlerts (add it, and its unit tests)", r.Alert)
				continue
			}
			if r.Labels["severity"] != want {
				t.Errorf("%s: severity %q, want %q", r.Alert, r.Labels["severity"], want)
			}
			if r.For == "" {
				t.Errorf("%s: no for: a single evaluation would page", r.Alert)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
		}
	}
	for a := range wantAlerts {
		if !got[a] {
			t.Errorf("alert %s missing", a)
		}
	}
}

func TestRulesRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not YAML", "kind: [", "PrometheusRule"},
		{"another kind", "kind: ConfigMap\nspec: {groups: [{name: a}]}", `kind "ConfigMap"`},
		{"no groups", "kind: PrometheusRule\nspec: {}", "spec.groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := monitoring.Rules([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Rules(%q) = %v, want an error with %q", tt.in, err, tt.want)
			}
		})
	}
}

// writeRules writes rules as dir/rules.yaml and the unit tests beside it.
func writeRules(t *testing.T, dir string, rules []byte) {
	t.Helper()
	tests, err := os.ReadFile(filepath.Join("testdata", "rules-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"rules.yaml": rules, "rules-test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPromtoolCheckAndTestRules(t *testing.T) {
	promtool(t)
	b, err := monitoring.Rules(monitoring.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeRules(t, dir, b)
	if out, err := runPromtool(t, dir, "check", "rules", "rules.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := runPromtool(t, dir, "test", "rules", "rules-test.yaml"); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestRuleUnitTestsCatchBreakage breaks each alert in two ways, never
// firing and firing at once (for: 0s), and wants promtool test rules to
// fail on each: the unit tests cover firing and not firing of every
// alert.
func TestRuleUnitTestsCatchBreakage(t *testing.T) {
	promtool(t)
	b, err := monitoring.Rules(monitoring.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	breaks := []struct {
		name  string
		apply func(*rule)
	}{
		{"never fires", func(r *rule) { r.Expr = "vector(1) > 2" }},
		{"fires at once", func(r *rule) { r.For = "0s" }},
	}
	alerts := slices.Sorted(func(yield func(string) bool) {
		for a := range wantAlerts {
			if !yield(a) {
				return
			}
		}
	})
	for _, alert := range alerts {
		for _, br := range breaks {
			t.Run(alert+" "+br.name, func(t *testing.T) {
				f := parseRules(t, b)
				found := false
				for gi := range f.Groups {
					for ri := range f.Groups[gi].Rules {
						if r := &f.Groups[gi].Rules[ri]; r.Alert == alert {
							br.apply(r)
							found = true
						}
					}
				}
				if !found {
					t.Fatalf("alert %s not in the rules", alert)
				}
				broken, err := yaml.Marshal(f)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				writeRules(t, dir, broken)
				out, err := runPromtool(t, dir, "test", "rules", "rules-test.yaml")
				if err == nil {
					t.Errorf("promtool test rules passes with %s broken (%s)", alert, br.name)
				} else if !bytes.Contains([]byte(out), []byte("alertname: "+alert)) {
					t.Errorf("promtool test rules failed, but not on %s:\n%s", alert, out)
				}
			})
		}
	}
}
