package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clusterInvariants are the properties of the cluster-wide objects: the
// coordinator's Deployment and Service, RBAC, namespaces, the
// kustomizations, the monitor's ConfigMap, images and cert-manager.
var clusterInvariants = []invariant{
	{
		name: "coordinator: one replica, Recreate, its PVC at " + dataDir,
		check: func(m *manifests) (bad []string) {
			d := find[*appsv1.Deployment](m, coordinator)
			if d == nil {
				return []string{"no Deployment " + coordinator}
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
				bad = append(bad, "replicas is not 1 (the bbolt file takes one writer)")
			}
			if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				bad = append(bad, fmt.Sprintf("strategy %q, want Recreate (a rolling update would start a second pod on a locked bbolt file)", d.Spec.Strategy.Type))
			}
			ps := d.Spec.Template.Spec
			ok := false
			for _, v := range ps.Volumes {
				if v.PersistentVolumeClaim == nil || find[*corev1.PersistentVolumeClaim](m, v.PersistentVolumeClaim.ClaimName) == nil {
					continue
				}
				for _, vm := range ps.Containers[0].VolumeMounts {
					ok = ok || vm.Name == v.Name && vm.MountPath == dataDir && vm.SubPath == "" && !vm.ReadOnly
				}
			}
			if !ok {
				bad = append(bad, "no PersistentVolumeClaim of the manifests mounted writable at "+dataDir)
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { *find[*appsv1.Deployment](m, coordinator).Spec.Replicas = 2 },
			func(m *manifests) {
				find[*appsv1.Deployment](m, coordinator).Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
			},
			func(m *manifests) { coordinatorPod(m).Volumes[0].PersistentVolumeClaim.ClaimName = "missing" },
			func(m *manifests) { coordinatorPod(m).Containers[0].VolumeMounts[0].MountPath = "/data" },
		},
	},
	{
		name: "coordinator: gRPC readiness and liveness probes on 7700 (with TLS: HTTPS GET /healthz on metrics)",
		check: func(m *manifests) (bad []string) {
			c := coordinatorPod(m).Containers[0]
			tls := flagValue(c.Args, "tls-cert") != "" // a rendering with the cert-manager patches applied
			for what, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				switch {
				case tls && (p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS):
					bad = append(bad, what+" probe is not HTTPS GET /healthz on port metrics (the coordinator serves gRPC over TLS, which the kubelet's gRPC probe cannot speak)")
				case !tls && (p == nil || p.GRPC == nil || p.GRPC.Port != 7700):
					bad = append(bad, what+" probe is not grpc on port 7700")
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { coordinatorPod(m).Containers[0].LivenessProbe = nil },
			func(m *manifests) { coordinatorPod(m).Containers[0].ReadinessProbe.GRPC.Port = 9090 },
		},
	},
	{
		name: "coordinator: requests and limits, unprivileged",
		check: func(m *manifests) (bad []string) {
			ps := coordinatorPod(m)
			if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
				bad = append(bad, "pod runAsNonRoot is not true")
			}
			for _, c := range ps.Containers {
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if _, ok := c.Resources.Requests[r]; !ok {
						bad = append(bad, fmt.Sprintf("%s: no %s request", c.Name, r))
					}
					if _, ok := c.Resources.Limits[r]; !ok {
						bad = append(bad, fmt.Sprintf("%s: no %s limit", c.Name, r))
					}
				}
				sc := c.SecurityContext
				if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					bad = append(bad, c.Name+": privileged, or allowPrivilegeEscalation is not false")
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { delete(coordinatorPod(m).Containers[0].Resources.Limits, corev1.ResourceMemory) },
			func(m *manifests) { coordinatorPod(m).Containers[0].Resources.Requests = nil },
			func(m *manifests) { p := true; coordinatorPod(m).Containers[0].SecurityContext.Privileged = &p },
			func(m *manifests) { coordinatorPod(m).SecurityContext.RunAsNonRoot = nil },
		},
	},
	{
		name: "coordinator Service: ClusterIP, grpc 7700, metrics 9090 and web 8080 to the coordinator's pods",
		check: func(m *manifests) (bad []string) {
			s := find[*corev1.Service](m, coordinator)
			if s == nil {
				return []string{"no Service " + coordinator}
			}
			if s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP {
				bad = append(bad, fmt.Sprintf("type %q", s.Spec.Type))
			}
			want := map[string]int32{"grpc": 7700, "metrics": 9090, "web": 8080}
			for _, p := range s.Spec.Ports {
				if want[p.Name] == p.Port {
					delete(want, p.Name)
				}
			}
			if len(want) > 0 {
				bad = append(bad, fmt.Sprintf("ports missing: %v", want))
			}
			podLabels := find[*appsv1.Deployment](m, coordinator).Spec.Template.Labels
			for k, v := range s.Spec.Selector {
				if podLabels[k] != v {
					bad = append(bad, fmt.Sprintf("selector %s=%s does not match the coordinator's pods", k, v))
				}
			}
			if len(s.Spec.Selector) == 0 {
				bad = append(bad, "no selector")
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { find[*corev1.Service](m, coordinator).Spec.Ports[1].Port = 9100 },
			func(m *manifests) { find[*corev1.Service](m, coordinator).Spec.Ports[2].Port = 8081 },
			func(m *manifests) {
				find[*corev1.Service](m, coordinator).Spec.Selector = map[string]string{"app.kubernetes.io/name": "x"}
			},
		},
	},
	{
		name:  "RBAC no wider than needed",
		check: checkRBAC,
		breaks: []func(m *manifests){
			func(m *manifests) { find[*rbacv1.Role](m, coordinator).Rules[0].Verbs = []string{"*"} },
			func(m *manifests) {
				find[*rbacv1.Role](m, coordinator).Rules[0].Resources = []string{"services", "secrets"}
			},
			func(m *manifests) { find[*rbacv1.Role](m, coordinator).Rules[1].Verbs = append([]string{}, "escalate") },
			func(m *manifests) {
				r := &find[*rbacv1.Role](m, coordinator).Rules[0]
				r.Verbs = append(r.Verbs, "patch")
			},
			func(m *manifests) {
				m.objects = append(m.objects, object{file: "x.yaml", obj: &rbacv1.ClusterRole{
					ObjectMeta: metav1.ObjectMeta{Name: coordinator + "-nodes"},
					Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
				}})
			},
			func(m *manifests) {
				find[*rbacv1.ClusterRole](m, coordinator).Rules[0].Resources = []string{"nodes", "secrets"}
			},
			func(m *manifests) {
				find[*rbacv1.Role](m, coordinator).Rules[2].Verbs = []string{"list", "watch", "delete"}
			},
			func(m *manifests) { find[*rbacv1.ClusterRoleBinding](m, coordinator).Subjects[0].Name = agentName },
			func(m *manifests) {
				m.objects = append(m.objects, object{file: "x.yaml", obj: &rbacv1.ClusterRoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: coordinator + "-admin"},
					RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"},
					Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: coordinator, Namespace: namespace}},
				}})
			},
			func(m *manifests) {
				find[*rbacv1.RoleBinding](m, coordinator).Subjects[0].Name = agentName
			},
			func(m *manifests) {
				r := &find[*rbacv1.Role](m, coordinator).Rules[2]
				r.Verbs = append(r.Verbs, "delete")
			},
			func(m *manifests) {
				find[*rbacv1.ClusterRole](m, coordinator).Rules[0].Verbs = []string{"create", "get"}
			},
			func(m *manifests) { find[*rbacv1.ClusterRoleBinding](m, coordinator).Subjects[0].Name = agentName },
		},
	},
	{
		name: "every namespaced object in " + namespace,
		check: func(m *manifests) (bad []string) {
			for _, o := range m.objects {
				kind := strings.TrimPrefix(fmt.Sprintf("%T", o.obj), "*")
				kind = kind[strings.LastIndex(kind, ".")+1:]
				switch ns := o.obj.GetNamespace(); {
				case clusterScoped[kind] && ns != "":
					bad = append(bad, fmt.Sprintf("%s: cluster-scoped %s %s has namespace %q", o.file, kind, o.obj.GetName(), ns))
				case !clusterScoped[kind] && ns != namespace:
					bad = append(bad, fmt.Sprintf("%s: %s %s in namespace %q", o.file, kind, o.obj.GetName(), ns))
				}
			}
			for dir, k := range m.kustomizations {
				for _, g := range k.ConfigMapGenerator {
					if g.Namespace != namespace {
						bad = append(bad, fmt.Sprintf("%s/kustomization.yaml: ConfigMap %s in namespace %q", dir, g.Name, g.Namespace))
					}
				}
			}
			if find[*corev1.Namespace](m, namespace) == nil {
				bad = append(bad, "no Namespace "+namespace)
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { find[*appsv1.DaemonSet](m, endpointName).Namespace = "" },
			func(m *manifests) { find[*rbacv1.Role](m, coordinator).Namespace = "default" },
			func(m *manifests) { m.kustomizations["base"].ConfigMapGenerator[0].Namespace = "default" },
		},
	},
	{
		name: "each kustomization lists every file beside it, and only files that exist",
		check: func(m *manifests) (bad []string) {
			if m.rendered {
				return nil // of the source files alone
			}
			for _, f := range m.files {
				if path.Base(f) == "kustomization.yaml" {
					continue
				}
				k := m.kustomizations[path.Dir(f)]
				if k == nil {
					bad = append(bad, f+": no kustomization.yaml beside it")
					continue
				}
				if !slices.Contains(k.Resources, path.Base(f)) && m.role(f) == "" {
					bad = append(bad, f+": not listed in "+path.Dir(f)+"/kustomization.yaml")
				}
			}
			for dir, k := range m.kustomizations {
				listed := slices.Clone(k.Resources)
				for _, p := range k.Patches {
					listed = append(listed, p.Path)
				}
				for _, g := range k.ConfigMapGenerator {
					listed = append(listed, g.Files...)
				}
				for _, l := range listed {
					if _, err := os.Stat(path.Join(dir, l)); err != nil {
						bad = append(bad, fmt.Sprintf("%s/kustomization.yaml: %v", dir, err))
					}
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { m.kustomizations["base"].Resources = m.kustomizations["base"].Resources[1:] },
			func(m *manifests) {
				m.kustomizations["cert-manager"].Patches = m.kustomizations["cert-manager"].Patches[1:]
			},
			func(m *manifests) {
				m.kustomizations["."].Resources = append(m.kustomizations["."].Resources, "missing.yaml")
			},
		},
	},
	{
		name: "the monitor's ConfigMap is deploy/config/coordinator.yaml",
		check: func(m *manifests) (bad []string) {
			want, err := os.ReadFile(monitorConfig)
			if err != nil {
				return []string{err.Error()}
			}
			if m.rendered {
				for _, cm := range all[*corev1.ConfigMap](m) {
					if strings.HasPrefix(cm.Name, "meshperf-coordinator-config-") && cm.Data["coordinator.yaml"] == string(want) {
						return nil
					}
				}
				return []string{"no ConfigMap meshperf-coordinator-config-HASH with deploy/config/coordinator.yaml as coordinator.yaml"}
			}
			got, ok := m.data["base/coordinator.yaml"]
			if !ok || !bytes.Equal(got, want) {
				bad = append(bad, "base/coordinator.yaml differs from deploy/config/coordinator.yaml: copy it")
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { m.data["base/coordinator.yaml"] = append(m.data["base/coordinator.yaml"], '#') },
		},
	},
	{
		name: "every container runs the meshperf image, which kustomize can override",
		check: func(m *manifests) (bad []string) {
			var pods []*corev1.PodSpec
			for _, d := range all[*appsv1.Deployment](m) {
				pods = append(pods, &d.Spec.Template.Spec)
			}
			for _, d := range all[*appsv1.DaemonSet](m) {
				pods = append(pods, &d.Spec.Template.Spec)
			}
			for _, ps := range pods {
				for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
					if name, _, _ := strings.Cut(c.Image, ":"); name != image {
						bad = append(bad, fmt.Sprintf("%s: image %q", c.Name, c.Image))
					}
				}
			}
			if k := m.kustomizations["base"]; !m.rendered && k == nil || k != nil && !slices.ContainsFunc(k.Images, func(i kustomizeImage) bool { return i.Name == image }) {
				bad = append(bad, "base/kustomization.yaml: no images entry for "+image)
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentPod(m).Containers[0].Image = "busybox" },
			func(m *manifests) { m.kustomizations["base"].Images = nil },
		},
	},
	{
		name: "cert-manager: the coordinator's certificate names its Service, the patches mount the certificates' secrets",
		check: func(m *manifests) (bad []string) {
			c := find[*certificate](m, coordinator)
			if (c != nil || !m.rendered) && (c == nil || !slices.Contains(c.Spec.DNSNames, coordinatorDNS)) {
				bad = append(bad, "Certificate "+coordinator+" does not name "+coordinatorDNS)
			}
			secrets := map[string]bool{}
			for _, c := range all[*certificate](m) {
				secrets[c.Spec.SecretName] = true
			}
			for _, name := range []string{agentName, coordinator} { // a rendering: the patches applied
				for _, v := range podOf(m, name).Volumes {
					if v.Name == "tls" && v.Secret != nil && !secrets[v.Secret.SecretName] {
						bad = append(bad, fmt.Sprintf("%s: secret %s is no Certificate's", name, v.Secret.SecretName))
					}
				}
			}
			for f, ops := range m.patches {
				for _, op := range ops {
					v, _ := op.Value.(map[string]any)
					s, _ := v["secret"].(map[string]any)
					if name, _ := s["secretName"].(string); strings.HasSuffix(name, "-tls") && !secrets[name] {
						bad = append(bad, fmt.Sprintf("%s: secret %s is no Certificate's", f, name))
					}
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) {
				find[*certificate](m, coordinator).Spec.DNSNames = []string{"meshperf-coordinator"}
			},
			func(m *manifests) { find[*certificate](m, agentName).Spec.SecretName = "other-tls" },
		},
	},
}
