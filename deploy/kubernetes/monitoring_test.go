package kubernetes

import (
	"fmt"
	"os"
	"path"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/deploy/kubernetes/monitoring"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) that the monitoring component uses.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
			// The chart's, with mtls.
			TLSConfig *struct {
				ServerName string `json:"serverName,omitempty"`
				CA         struct {
					Secret secretKeySelector `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig,omitempty"`
			Authorization *struct {
				Credentials secretKeySelector `json:"credentials"`
			} `json:"authorization,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// secretKeySelector names a key of a Secret.
type secretKeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// prometheusRule is the part of the Prometheus Operator's PrometheusRule
// (monitoring.coreos.com/v1) that the monitoring component uses.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert,omitempty"`
				Record      string            `json:"record,omitempty"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// checkMonitoring checks the monitoring component against the base: a
// Component whose every file exists, a ServiceMonitor that selects the
// coordinator's Service (its labels, in its namespace) on a port the
// Service names, a PrometheusRule with rules, the dashboard in a
// ConfigMap the Grafana sidecar loads, and no object the base has too.
func checkMonitoring(m *manifests) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	k := m.kustomizations["monitoring"]
	if k == nil {
		return []string{"monitoring/kustomization.yaml missing"}
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1alpha1" || k.Kind != "Component" {
		fail("monitoring/kustomization.yaml is %s %s, want kustomize.config.k8s.io/v1alpha1 Component", k.APIVersion, k.Kind)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(path.Join("monitoring", r)); err != nil {
			fail("monitoring: resource %s: %v", r, err)
		}
	}
	svc := find[*corev1.Service](m, "meshperf-coordinator")
	if svc == nil {
		return append(errs, "no Service meshperf-coordinator")
	}
	var sms []*serviceMonitor
	for _, o := range m.objects {
		if s, ok := o.obj.(*serviceMonitor); ok && path.Dir(o.file) == "monitoring" {
			sms = append(sms, s)
		}
	}
	if len(sms) != 1 {
		fail("monitoring: %d ServiceMonitors, want 1", len(sms))
	}
	for _, sm := range sms {
		for key, v := range sm.Spec.Selector.MatchLabels {
			if svc.Labels[key] != v {
				fail("ServiceMonitor %s selects %s=%s, which Service %s has not (%v)", sm.Name, key, v, svc.Name, svc.Labels)
			}
		}
		if len(sm.Spec.Selector.MatchLabels) == 0 {
			fail("ServiceMonitor %s selects every Service", sm.Name)
		}
		if len(sm.Spec.NamespaceSelector.MatchNames) != 1 || sm.Spec.NamespaceSelector.MatchNames[0] != svc.Namespace {
			fail("ServiceMonitor %s: namespaceSelector %v, want [%s]", sm.Name, sm.Spec.NamespaceSelector.MatchNames, svc.Namespace)
		}
		if len(sm.Spec.Endpoints) == 0 {
			fail("ServiceMonitor %s has no endpoints", sm.Name)
		}
		for _, e := range sm.Spec.Endpoints {
			found := false
			for _, p := range svc.Spec.Ports {
				found = found || p.Name == e.Port
			}
			if !found || e.Port != "metrics" {
				fail("ServiceMonitor %s: port %q, want the Service's metrics port", sm.Name, e.Port)
			}
			if e.Path != "/metrics" {
				fail("ServiceMonitor %s: path %q, want /metrics", sm.Name, e.Path)
			}
		}
	}
	pr := find[*prometheusRule](m, "meshperf")
	if pr == nil || len(pr.Spec.Groups) == 0 {
		fail("monitoring: no PrometheusRule meshperf with rule groups")
	}
	dash := false
	for _, g := range k.ConfigMapGenerator {
		for _, f := range g.Files {
			if f == "meshperf-dashboard.json" && g.Options != nil && g.Options.Labels["grafana_dashboard"] == "1" && g.Namespace == svc.Namespace {
				dash = true
			}
		}
	}
	if !dash {
		fail(`monitoring: no configMapGenerator of meshperf-dashboard.json labelled grafana_dashboard: "1" in namespace %s`, svc.Namespace)
	}
	// A component adds; an object the base has already would clash.
	names := map[string]bool{}
	for _, o := range m.objects {
		if path.Dir(o.file) != "monitoring" {
			names[fmt.Sprintf("%T", o.obj)+"/"+o.obj.GetNamespace()+"/"+o.obj.GetName()] = true
		}
	}
	for _, o := range m.objects {
		if path.Dir(o.file) == "monitoring" && names[fmt.Sprintf("%T", o.obj)+"/"+o.obj.GetNamespace()+"/"+o.obj.GetName()] {
			fail("monitoring: %s %s is in the base too", fmt.Sprintf("%T", o.obj), o.obj.GetName())
		}
	}
	return errs
}

func TestMonitoringComponent(t *testing.T) {
	m := load(t)
	for _, e := range checkMonitoring(m) {
		t.Error(e)
	}
	// The embedded files are the component's.
	for name, b := range map[string][]byte{"prometheusrule.yaml": monitoring.PrometheusRule, "meshperf-dashboard.json": monitoring.Dashboard} {
		disk, err := os.ReadFile(path.Join("monitoring", name))
		if err != nil || string(disk) != string(b) {
			t.Errorf("monitoring/%s: embedded copy differs (%v)", name, err)
		}
	}
}

func TestMonitoringComponentCatchesBreakage(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(*manifests)
	}{
		{"selector the Service lacks", func(m *manifests) {
			find[*serviceMonitor](m, "meshperf-coordinator").Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "coordinator"
		}},
		{"port the Service lacks", func(m *manifests) {
			find[*serviceMonitor](m, "meshperf-coordinator").Spec.Endpoints[0].Port = "http-metrics"
		}},
		{"Service's port renamed", func(m *manifests) {
			svc := find[*corev1.Service](m, "meshperf-coordinator")
			for i := range svc.Spec.Ports {
				if svc.Spec.Ports[i].Name == "metrics" {
					svc.Spec.Ports[i].Name = "prom"
				}
			}
		}},
		{"other namespace", func(m *manifests) {
			find[*serviceMonitor](m, "meshperf-coordinator").Spec.NamespaceSelector.MatchNames = []string{"default"}
		}},
		{"no sidecar label", func(m *manifests) { m.kustomizations["monitoring"].ConfigMapGenerator[0].Options = nil }},
		{"a Kustomization, not a Component", func(m *manifests) { m.kustomizations["monitoring"].Kind = "Kustomization" }},
		{"no rules", func(m *manifests) { find[*prometheusRule](m, "meshperf").Spec.Groups = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := load(t)
			tt.breakIt(m)
			if errs := checkMonitoring(m); len(errs) == 0 {
				t.Error("checkMonitoring found nothing wrong")
			}
		})
	}
}
