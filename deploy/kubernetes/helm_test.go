package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// helmOwnLabels are the labels the chart puts on every object's metadata
// that the kustomize manifests have not (_helpers.tpl, meshperf.labels):
// the equivalence test strips exactly these.
var helmOwnLabels = []string{"app.kubernetes.io/managed-by", "helm.sh/chart"}

// equivalents are kustomize renderings and the chart values that must
// render the same objects.
var equivalents = []struct {
	name                  string
	resources, components []string // of the kustomize rendering, relative to deploy/kubernetes
	values                string   // of the chart
	// differ are the objects (kind/namespace/name) both render on purpose
	// differently; they must differ.
	differ []string
}{
	{name: "base", resources: []string{"."}, values: "namespace: {create: true}\n"},
	{name: "mtls", resources: []string{"cert-manager"}, values: "namespace: {create: true}\nmtls: {enabled: true}\n"},
	{name: "monitoring", resources: []string{"."}, components: []string{"monitoring"},
		values: "namespace: {create: true}\nmonitoring: {enabled: true}\n"},
	// The component's ServiceMonitor scrapes plain http; with mtls the
	// chart's scrapes HTTPS with the token (the README's patch).
	{name: "mtls and monitoring", resources: []string{"cert-manager"}, components: []string{"monitoring"},
		values: "namespace: {create: true}\nmtls: {enabled: true}\nmonitoring: {enabled: true}\n",
		differ: []string{"ServiceMonitor/meshperf/meshperf-coordinator"}},
}

// normalized is a decoded object as plain JSON values, keyed by
// kind/namespace/name, with Helm's own labels removed.
func normalized(m *manifests) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, o := range m.objects {
		b, err := json.Marshal(o.obj)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		md, _ := v["metadata"].(map[string]any)
		if labels, ok := md["labels"].(map[string]any); ok {
			for _, l := range helmOwnLabels {
				delete(labels, l)
			}
			if len(labels) == 0 {
				delete(md, "labels")
			}
		}
		key := fmt.Sprintf("%v/%s/%s", v["kind"], o.obj.GetNamespace(), o.obj.GetName())
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s twice", key)
		}
		out[key] = v
	}
	return out, nil
}

// compareRenderings returns how the chart's rendering differs from
// kustomize's: objects only one renders, and every difference of an
// object both render but those in differ, which must differ.
func compareRenderings(kust, chart *manifests, differ []string) []string {
	k, err := normalized(kust)
	if err != nil {
		return []string{"kustomize: " + err.Error()}
	}
	h, err := normalized(chart)
	if err != nil {
		return []string{"helm: " + err.Error()}
	}
	var bad []string
	for key, kv := range k {
		hv, ok := h[key]
		switch d := cmp.Diff(kv, hv); {
		case !ok:
			bad = append(bad, key+": rendered by kustomize only")
		case slices.Contains(differ, key) && d == "":
			bad = append(bad, key+": the same in both, but meant to differ")
		case !slices.Contains(differ, key) && d != "":
			bad = append(bad, fmt.Sprintf("%s differs (-kustomize +helm):\n%s", key, d))
		}
	}
	for key := range h {
		if _, ok := k[key]; !ok {
			bad = append(bad, key+": rendered by helm only")
		}
	}
	sort.Strings(bad)
	return bad
}

func TestHelmMatchesKustomize(t *testing.T) {
	bin := helmBinary(t)
	for _, tt := range equivalents {
		t.Run(tt.name, func(t *testing.T) {
			kust, chart := renderBoth(t, bin, tt.resources, tt.components, tt.values)
			if len(kust.objects) < 10 {
				t.Fatalf("kustomize rendered %d objects", len(kust.objects))
			}
			for _, b := range compareRenderings(kust, chart, tt.differ) {
				t.Error(b)
			}
		})
	}
}

// TestHelmEquivalenceCatchesDrift: a chart object changed in any way, one
// missing and one added must each fail the comparison.
func TestHelmEquivalenceCatchesDrift(t *testing.T) {
	bin := helmBinary(t)
	tt := equivalents[1] // mtls: the patches
	breaks := []struct {
		name    string
		breakIt func(m *manifests)
	}{
		{"an argument missing", func(m *manifests) {
			c := &agentPod(m).Containers[0]
			c.Args = slices.DeleteFunc(c.Args, isArg("--tls-ca"))
		}},
		{"a probe's scheme", func(m *manifests) { coordinatorPod(m).Containers[0].LivenessProbe.HTTPGet.Scheme = "" }},
		{"a label of the kustomize base", func(m *manifests) {
			delete(find[*corev1.Service](m, coordinator).Labels, "app.kubernetes.io/part-of")
		}},
		{"a foreign label", func(m *manifests) { find[*certificate](m, agentName).Labels["x"] = "y" }},
		{"the config's hash", func(m *manifests) { coordinatorPod(m).Volumes[1].ConfigMap.Name += "x" }},
		{"an object missing", func(m *manifests) {
			m.objects = slices.DeleteFunc(m.objects, func(o object) bool { _, ok := o.obj.(*issuer); return ok })
		}},
		{"an object added", func(m *manifests) {
			m.objects = append(m.objects, object{file: "x", obj: &appsv1.DaemonSet{}})
		}},
	}
	for _, b := range breaks {
		t.Run(b.name, func(t *testing.T) {
			kust, chart := renderBoth(t, bin, tt.resources, tt.components, tt.values)
			if got := compareRenderings(kust, chart, tt.differ); len(got) > 0 {
				t.Fatalf("differ before the breakage: %v", got)
			}
			b.breakIt(chart)
			if got := compareRenderings(kust, chart, tt.differ); len(got) == 0 {
				t.Error("the comparison found no difference")
			}
		})
	}
}

// renderBoth renders the kustomization and the chart and decodes both.
func renderBoth(t *testing.T, bin string, resources, components []string, values string) (kust, chart *manifests) {
	t.Helper()
	kb, err := kustomizeBuild(resources, components)
	if err != nil {
		t.Fatal(err)
	}
	if kust, err = renderedManifests("kustomize build", kb); err != nil {
		t.Fatal(err)
	}
	hb, err := helmTemplate(t, bin, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	if chart, err = renderedManifests("helm template", hb); err != nil {
		t.Fatal(err)
	}
	return kust, chart
}

// TestChartFilesAreCopies: the chart cannot read files outside its
// directory, so it carries copies of the monitor's config, the rules and
// the dashboard; they must be the originals byte for byte.
func TestChartFilesAreCopies(t *testing.T) {
	for copyName, orig := range map[string]string{
		"files/coordinator.yaml":        monitorConfig,
		"files/prometheusrule.yaml":     "monitoring/prometheusrule.yaml",
		"files/meshperf-dashboard.json": "monitoring/meshperf-dashboard.json",
	} {
		got, err := os.ReadFile(filepath.Join(chartDir, copyName))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from deploy/kubernetes/%s: cp deploy/kubernetes/%[3]s deploy/helm/meshperf/%[2]s", chartDir, copyName, orig)
		}
	}
}

// lintValues are values that helm lint --strict must pass: the defaults
// and each feature on.
var lintValues = map[string]string{
	"defaults":     "",
	"namespace":    "namespace: {create: true}\n",
	"mtls":         "mtls: {enabled: true}\n",
	"monitoring":   "monitoring: {enabled: true, serviceMonitor: {labels: {release: prometheus}}}\n",
	"everything":   "mtls: {enabled: true}\nmonitoring: {enabled: true}\nremoteWrite: {url: https://mimir.example/api/v1/push, bearerTokenSecret: {name: rw-token, key: token}, caSecret: {name: rw-ca, key: ca.crt}}\n",
	"remote write": "remoteWrite: {url: http://vm.monitoring.svc:8428/api/v1/write}\n",
	"web off":      "web: {enabled: false}\n",
	"web tls":      "web: {tls: {secretName: meshperf-web-tls}}\n",
}

func TestHelmLint(t *testing.T) {
	bin := helmBinary(t)
	for name, values := range lintValues {
		t.Run(name, func(t *testing.T) {
			out, err := helm(bin, "lint", "--strict", chartDir, "--namespace", namespace, "-f", helmValuesFile(t, values))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(out, []byte("1 chart(s) linted, 0 chart(s) failed")) {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
}

// TestHelmRejectsBadValues: the values schema (and the chart's own checks)
// refuse bad values, naming the field, in helm lint and helm template.
func TestHelmRejectsBadValues(t *testing.T) {
	bin := helmBinary(t)
	tests := []struct {
		name, values, want string
		// byTemplate: the chart's own check (fail), which helm lint
		// reports as [INFO] without failing; the schema's fail it.
		byTemplate bool
	}{
		{"unknown key", "mtls: {enable: true}\n", "enable", false},
		{"unknown top-level key", "tolerations: []\n", "tolerations", false},
		{"wrong type", "mtls: {enabled: \"yes\"}\n", "/mtls/enabled", false},
		{"port as a string", "web: {port: \"8080\"}\n", "/web/port", false},
		{"port out of range", "web: {port: 70000}\n", "/web/port", false},
		{"port of another listener", "web: {port: 9090}\n", "/web/port", false},
		{"pull policy not an enum value", "image: {pullPolicy: Sometimes}\n", "/image/pullPolicy", false},
		{"image with a tag in the repository", "image: {repository: \"ghcr.io/meshperf/meshperf:v1\"}\n", "/image/repository", false},
		{"agent with part of a CPU", "agent: {resources: {requests: {cpu: 500m}, limits: {cpu: 500m}}}\n", "/agent/resources/requests/cpu", false},
		{"agent below Guaranteed QoS", "agent: {resources: {requests: {memory: 128Mi}}}\n", "agent.resources: requests must equal limits", true},
		{"toleration operator", "nodes: {tolerations: [{operator: Any}]}\n", "/nodes/tolerations/0/operator", false},
		{"remote write not http", "remoteWrite: {url: \"ftp://x/y\"}\n", "/remoteWrite/url", false},
		{"remote write token without a URL", "remoteWrite: {bearerTokenSecret: {name: rw-token, key: token}}\n", "remoteWrite.bearerTokenSecret and remoteWrite.caSecret need remoteWrite.url", true},
		{"secret name", "web: {tls: {secretName: Web_TLS}}\n", "/web/tls/secretName", false},
		{"quantity", "coordinator: {persistence: {size: lots}}\n", "/coordinator/persistence/size", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := helmValuesFile(t, tt.values)
			for _, args := range [][]string{
				{"template", "meshperf", chartDir, "--namespace", namespace, "-f", f},
				{"lint", "--strict", chartDir, "--namespace", namespace, "-f", f},
			} {
				_, stderr, err := helmRun(bin, args...)
				switch {
				case tt.byTemplate && args[0] == "lint":
					if err != nil || !bytes.Contains(stderr, []byte("[INFO] Fail: "+tt.want)) {
						t.Errorf("helm lint: want it to report %q: %v\n%s", tt.want, err, stderr)
					}
				case err == nil:
					t.Errorf("helm %s accepted:\n%s", args[0], tt.values)
				case !strings.Contains(err.Error(), tt.want):
					t.Errorf("helm %s: the error does not name %q:\n%v", args[0], tt.want, err)
				}
			}
		})
	}
}
