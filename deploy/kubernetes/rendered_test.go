package kubernetes

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/deploy/kubernetes/monitoring"
)

// Names of invariants that a rendering's values change on purpose.
const (
	invTolerations = "agent and endpoint tolerate every taint"
	invNamespace   = "every namespaced object in " + namespace
	invService     = "coordinator Service: ClusterIP, grpc 7700, metrics 9090 and web 8080 to the coordinator's pods"
	invImage       = "every container runs the meshperf image, which kustomize can override"
	invMTLSWeb     = "cert-manager overlay: /metrics over TLS with a token, the web UI over TLS (its API takes the API token), probes over HTTPS"
)

// renderings are the kustomize and helm renderings that every invariant
// of the source files (invariants, securityInvariants) must hold on too,
// but those in skip, and then check.
var renderings = []struct {
	name string
	// kustomize: resources and components, relative to deploy/kubernetes;
	// nil resources: helm template with values.
	resources, components []string
	values                string
	skip                  []string
	check                 func(m *manifests, out []byte) []string
}{
	{name: "kustomize base", resources: []string{"."}},
	{name: "kustomize cert-manager", resources: []string{"cert-manager"}},
	{name: "kustomize base and monitoring", resources: []string{"."}, components: []string{"monitoring"}, check: checkRenderedMonitoring},
	// The component scrapes over http; with the cert-manager overlay you
	// patch in HTTPS and the token (README).
	{name: "kustomize cert-manager and monitoring", resources: []string{"cert-manager"}, components: []string{"monitoring"},
		check: func(m *manifests, out []byte) []string { return checkMonitoringScrape(m, out, false) }},
	{name: "helm defaults", skip: []string{invNamespace}, check: func(m *manifests, _ []byte) []string {
		if len(all[*corev1.Namespace](m)) > 0 {
			return []string{"a Namespace without namespace.create"}
		}
		return nil
	}},
	{name: "helm mtls", values: "namespace: {create: true}\nmtls: {enabled: true}\n"},
	{name: "helm monitoring", values: "namespace: {create: true}\nmonitoring: {enabled: true}\n", check: checkRenderedMonitoring},
	{name: "helm mtls and monitoring", values: "namespace: {create: true}\nmtls: {enabled: true}\nmonitoring: {enabled: true}\n", check: checkRenderedMonitoring},
	{
		name:   "helm remote write",
		values: "namespace: {create: true}\nremoteWrite: {url: https://mimir.example/api/v1/push, bearerTokenSecret: {name: rw-token, key: token}, caSecret: {name: rw-ca, key: ca.crt}}\n",
		check: func(m *manifests, _ []byte) (bad []string) {
			ps := coordinatorPod(m)
			c := ps.Containers[0]
			if got := flagValue(c.Args, "remote-write"); got != "https://mimir.example/api/v1/push" {
				bad = append(bad, fmt.Sprintf("--remote-write=%q", got))
			}
			for flag, secret := range map[string]string{"remote-write-bearer-token-file": "rw-token", "remote-write-ca-file": "rw-ca"} {
				f := flagValue(c.Args, flag)
				if s := secretAt(ps, c, f); f == "" || s != secret {
					bad = append(bad, fmt.Sprintf("--%s=%q is not in a read-only mount of Secret %s (found %q)", flag, f, secret, s))
				}
			}
			return bad
		},
	},
	{
		name:   "helm web off",
		values: "namespace: {create: true}\nweb: {enabled: false}\n",
		skip:   []string{invService},
		check: func(m *manifests, _ []byte) (bad []string) {
			c := coordinatorPod(m).Containers[0]
			if flagValue(c.Args, "web-listen") != "" || slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "web" }) {
				bad = append(bad, "the web UI is on")
			}
			return bad
		},
	},
	{
		name:   "helm web on 8443 with TLS",
		values: "namespace: {create: true}\nweb: {port: 8443, tls: {secretName: meshperf-web-tls}}\n",
		skip:   []string{invService},
		check: func(m *manifests, _ []byte) (bad []string) {
			ps := coordinatorPod(m)
			c := ps.Containers[0]
			if got := flagValue(c.Args, "web-listen"); got != ":8443" {
				bad = append(bad, "--web-listen="+got)
			}
			if f := flagValue(c.Args, "web-tls-cert"); secretAt(ps, c, f) != "meshperf-web-tls" {
				bad = append(bad, fmt.Sprintf("--web-tls-cert=%q is not in Secret meshperf-web-tls", f))
			}
			s := find[*corev1.Service](m, coordinator)
			if s == nil || !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "web" && p.Port == 8443 }) {
				bad = append(bad, "the Service has no web port 8443")
			}
			return bad
		},
	},
	{
		name: "helm resources node selector tolerations image",
		values: "namespace: {create: true}\nimage: {repository: registry.example/meshperf, tag: v1.2.3, pullPolicy: IfNotPresent, pullSecrets: [regcred]}\n" +
			"agent: {resources: {requests: {cpu: 2, memory: 1Gi}, limits: {cpu: 2, memory: 1Gi}}}\n" +
			"coordinator: {nodeSelector: {role: infra}, resources: {requests: {cpu: 200m, memory: 1Gi}, limits: {cpu: 2, memory: 2Gi}}}\n" +
			"nodes: {nodeSelector: {kubernetes.io/os: linux}, tolerations: [{key: dedicated, operator: Equal, value: net, effect: NoSchedule}]}\n",
		skip: []string{invTolerations, invImage},
		check: func(m *manifests, _ []byte) (bad []string) {
			for _, name := range []string{agentName, endpointName} {
				ps := podOf(m, name)
				if ps.NodeSelector["kubernetes.io/os"] != "linux" || len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "dedicated" {
					bad = append(bad, fmt.Sprintf("%s: nodeSelector %v, tolerations %v", name, ps.NodeSelector, ps.Tolerations))
				}
			}
			for _, name := range []string{agentName, endpointName, coordinator} {
				ps := podOf(m, name)
				c := ps.Containers[0]
				if c.Image != "registry.example/meshperf:v1.2.3" || c.ImagePullPolicy != corev1.PullIfNotPresent || len(ps.ImagePullSecrets) != 1 {
					bad = append(bad, fmt.Sprintf("%s: image %s, pull policy %q, pull secrets %v", name, c.Image, c.ImagePullPolicy, ps.ImagePullSecrets))
				}
			}
			if cpu := agentPod(m).Containers[0].Resources.Limits[corev1.ResourceCPU]; cpu.String() != "2" {
				bad = append(bad, "agent CPU limit "+cpu.String())
			}
			if coordinatorPod(m).NodeSelector["role"] != "infra" {
				bad = append(bad, "coordinator: no nodeSelector role=infra")
			}
			return bad
		},
	},
}

// checkRenderedMonitoring checks a rendering with monitoring: one
// ServiceMonitor that selects the coordinator's Service on its metrics
// port (over HTTPS with the CA and token when the coordinator serves TLS),
// the rules, and the dashboard in a ConfigMap for Grafana's sidecar.
func checkRenderedMonitoring(m *manifests, out []byte) []string {
	return checkMonitoringScrape(m, out, true)
}

// checkMonitoringScrape is checkRenderedMonitoring, checking the scrape
// over TLS only if tlsScrape.
func checkMonitoringScrape(m *manifests, _ []byte, tlsScrape bool) (bad []string) {
	svc := find[*corev1.Service](m, coordinator)
	sms := all[*serviceMonitor](m)
	if svc == nil || len(sms) != 1 {
		return []string{fmt.Sprintf("%d ServiceMonitors (want 1), Service %s: %v", len(sms), coordinator, svc != nil)}
	}
	sm := sms[0]
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			bad = append(bad, fmt.Sprintf("ServiceMonitor selects %s=%s, which the Service has not", k, v))
		}
	}
	if len(sm.Spec.Selector.MatchLabels) == 0 || !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{svc.Namespace}) {
		bad = append(bad, "ServiceMonitor selects more than the coordinator's Service")
	}
	tls := tlsScrape && flagValue(coordinatorPod(m).Containers[0].Args, "metrics-tls-cert") != ""
	for _, e := range sm.Spec.Endpoints {
		if e.Port != "metrics" || e.Path != "/metrics" {
			bad = append(bad, fmt.Sprintf("ServiceMonitor endpoint %s %s", e.Port, e.Path))
		}
		if !tls {
			continue
		}
		switch {
		case e.Scheme != "https":
			bad = append(bad, fmt.Sprintf("ServiceMonitor scheme %q, the metrics are served over TLS", e.Scheme))
		case e.TLSConfig == nil || e.TLSConfig.ServerName != coordinatorDNS || e.TLSConfig.CA.Secret.Name != "meshperf-coordinator-tls" || e.TLSConfig.CA.Secret.Key != "ca.crt":
			bad = append(bad, fmt.Sprintf("ServiceMonitor tlsConfig %+v: not server %s verified by ca.crt of meshperf-coordinator-tls", e.TLSConfig, coordinatorDNS))
		case e.Authorization == nil || e.Authorization.Credentials.Name != "meshperf-metrics-token" || e.Authorization.Credentials.Key != "token":
			bad = append(bad, "ServiceMonitor sends no token of meshperf-metrics-token")
		}
	}
	if pr := find[*prometheusRule](m, "meshperf"); pr == nil || len(pr.Spec.Groups) == 0 || len(pr.Spec.Groups[0].Rules) < 5 {
		bad = append(bad, "no PrometheusRule meshperf with its rules")
	}
	if !slices.ContainsFunc(all[*corev1.ConfigMap](m), func(cm *corev1.ConfigMap) bool {
		return cm.Labels["grafana_dashboard"] == "1" && cm.Data["meshperf-dashboard.json"] == string(monitoring.Dashboard)
	}) {
		bad = append(bad, `no ConfigMap labelled grafana_dashboard: "1" with meshperf-dashboard.json`)
	}
	return bad
}

func TestRenderingsKeepInvariants(t *testing.T) {
	var bin string
	for _, r := range renderings {
		t.Run(r.name, func(t *testing.T) {
			var out []byte
			var err error
			if r.resources != nil {
				out, err = kustomizeBuild(r.resources, r.components)
			} else {
				if bin == "" {
					bin = helmBinary(t)
				}
				out, err = helmTemplate(t, bin, namespace, r.values)
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := renderedManifests(r.name, out)
			if err != nil {
				t.Fatal(err)
			}
			for _, inv := range append(slices.Clone(invariants), securityInvariants...) {
				if slices.Contains(r.skip, inv.name) {
					continue
				}
				for _, b := range inv.check(m) {
					t.Errorf("%s: %s", inv.name, b)
				}
			}
			if r.check != nil {
				for _, b := range r.check(m, out) {
					t.Error(b)
				}
			}
		})
	}
	// A skip names an invariant that exists.
	for _, r := range renderings {
		for _, s := range r.skip {
			if !slices.ContainsFunc(append(slices.Clone(invariants), securityInvariants...), func(i invariant) bool { return i.name == s }) {
				t.Errorf("%s: skips %q, no such invariant", r.name, s)
			}
		}
	}
}

// TestHelmReleaseNamespace: the chart in another namespace names that
// namespace wherever the manifests name meshperf.
func TestHelmReleaseNamespace(t *testing.T) {
	bin := helmBinary(t)
	out, err := helmTemplate(t, bin, "netperf", "namespace: {create: true}\nmtls: {enabled: true}\nmonitoring: {enabled: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	m, err := renderedManifests("helm template -n netperf", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range m.objects {
		kind := strings.TrimPrefix(fmt.Sprintf("%T", o.obj), "*")
		kind = kind[strings.LastIndex(kind, ".")+1:]
		if ns := o.obj.GetNamespace(); !clusterScoped[kind] && ns != "netperf" {
			t.Errorf("%s %s in namespace %q", kind, o.obj.GetName(), ns)
		}
	}
	for _, s := range []string{"namespace: meshperf", ".meshperf.svc", "=meshperf\n", "[meshperf]"} {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("the rendering in namespace netperf has %q", s)
		}
	}
	for _, want := range []string{"--kube-namespace=netperf", "--coordinator=meshperf-coordinator.netperf.svc:7700", "- meshperf-coordinator.netperf.svc\n", "matchNames: [netperf]"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the rendering in namespace netperf lacks %q", want)
		}
	}
	if find[*appsv1.DaemonSet](m, agentName) == nil {
		t.Error("no agent DaemonSet")
	}
}

// TestHelmCoordinatorConfig: coordinator.config replaces the monitor's
// schedules, in a ConfigMap of another name (a change rolls the
// coordinator) that the coordinator mounts.
func TestHelmCoordinatorConfig(t *testing.T) {
	bin := helmBinary(t)
	const custom = "probes:\n  interval: 30s\n"
	names := map[string]string{}
	for what, values := range map[string]string{"default": "", "custom": "coordinator: {config: \"" + strings.ReplaceAll(custom, "\n", `\n`) + "\"}\n"} {
		out, err := helmTemplate(t, bin, namespace, values)
		if err != nil {
			t.Fatal(err)
		}
		m, err := renderedManifests(what, out)
		if err != nil {
			t.Fatal(err)
		}
		cms := all[*corev1.ConfigMap](m)
		if len(cms) != 1 {
			t.Fatalf("%s: %d ConfigMaps", what, len(cms))
		}
		names[what] = cms[0].Name
		if got := coordinatorPod(m).Volumes[1].ConfigMap; got == nil || got.Name != cms[0].Name {
			t.Errorf("%s: the coordinator mounts %+v, not ConfigMap %s", what, got, cms[0].Name)
		}
		if what == "custom" && cms[0].Data["coordinator.yaml"] != custom {
			t.Errorf("custom: coordinator.yaml is %q", cms[0].Data["coordinator.yaml"])
		}
	}
	if names["default"] == names["custom"] || !strings.HasPrefix(names["custom"], "meshperf-coordinator-config-") {
		t.Errorf("ConfigMap names %v: want meshperf-coordinator-config-HASH, the hash changing with the content", names)
	}
}
