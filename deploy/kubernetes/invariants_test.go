package kubernetes

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	namespace      = "meshperf"
	agentName      = "meshperf-agent"
	endpointName   = "meshperf-endpoint"
	coordinator    = "meshperf-coordinator"
	sharedDir      = "/var/run/meshperf"
	endpointDir    = sharedDir + "/endpoint"
	dataDir        = "/var/lib/meshperf"
	image          = "ghcr.io/meshperf/meshperf"
	monitorConfig  = "../config/coordinator.yaml"
	coordinatorDNS = "meshperf-coordinator.meshperf.svc"
)

// invariant is one property of the manifests; check returns what breaks it.
type invariant struct {
	name  string
	check func(m *manifests) []string
	// breaks changes decoded manifests so that check must complain: proof
	// that the check checks something.
	breaks []func(m *manifests)
}

// invariants are nodeInvariants (the agent's and the endpoint's) and
// clusterInvariants (the coordinator, RBAC, kustomize, the config, images
// and cert-manager).
var invariants = slices.Concat(nodeInvariants, clusterInvariants)

// nodeInvariants are the properties of the per-node DaemonSets.
var nodeInvariants = []invariant{
	{
		name: "agent on the host network and PID namespace, privileged",
		check: func(m *manifests) (bad []string) {
			ds := find[*appsv1.DaemonSet](m, agentName)
			if ds == nil {
				return []string{"no DaemonSet " + agentName}
			}
			ps := ds.Spec.Template.Spec
			if !ps.HostNetwork {
				bad = append(bad, "hostNetwork is not true")
			}
			if !ps.HostPID {
				bad = append(bad, "hostPID is not true")
			}
			if ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				bad = append(bad, fmt.Sprintf("dnsPolicy %q, want ClusterFirstWithHostNet (to resolve the coordinator's Service)", ps.DNSPolicy))
			}
			for _, c := range ps.Containers {
				if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
					bad = append(bad, "container "+c.Name+" is not privileged")
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentPod(m).HostNetwork = false },
			func(m *manifests) { agentPod(m).HostPID = false },
			func(m *manifests) { agentPod(m).DNSPolicy = corev1.DNSClusterFirst },
			func(m *manifests) { *agentPod(m).Containers[0].SecurityContext.Privileged = false },
			func(m *manifests) { agentPod(m).Containers[0].SecurityContext = nil },
		},
	},
	{
		name: "agent and endpoint tolerate every taint",
		check: func(m *manifests) (bad []string) {
			for _, name := range []string{agentName, endpointName} {
				ds := find[*appsv1.DaemonSet](m, name)
				if ds == nil {
					bad = append(bad, "no DaemonSet "+name)
					continue
				}
				if !slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(t corev1.Toleration) bool {
					return t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == ""
				}) {
					bad = append(bad, name+": no toleration {operator: Exists} (control-plane nodes would go unmeasured)")
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentPod(m).Tolerations = nil },
			func(m *manifests) { endpointPod(m).Tolerations[0].Key = "node-role.kubernetes.io/control-plane" },
		},
	},
	{
		name: "agent takes NODE_NAME and HOST_IP from the downward API",
		check: func(m *manifests) (bad []string) {
			want := map[string]string{"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"}
			for _, c := range agentPod(m).Containers {
				for name, field := range want {
					i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
					if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != field {
						bad = append(bad, fmt.Sprintf("container %s: %s is not from fieldRef %s", c.Name, name, field))
					}
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentPod(m).Containers[0].Env = nil },
			func(m *manifests) { agentPod(m).Containers[0].Env[1].ValueFrom.FieldRef.FieldPath = "status.podIP" },
			func(m *manifests) {
				agentPod(m).Containers[0].Env[0] = corev1.EnvVar{Name: "NODE_NAME", Value: "node-1"}
			},
		},
	},
	{
		name: "agent has Guaranteed QoS with whole CPUs",
		check: func(m *manifests) (bad []string) {
			ps := agentPod(m)
			for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					req, okReq := c.Resources.Requests[r]
					lim, okLim := c.Resources.Limits[r]
					switch {
					case !okReq || !okLim:
						bad = append(bad, fmt.Sprintf("container %s: %s request or limit missing", c.Name, r))
					case req.Cmp(lim) != 0:
						bad = append(bad, fmt.Sprintf("container %s: %s request %s != limit %s", c.Name, r, req.String(), lim.String()))
					case r == corev1.ResourceCPU && (lim.MilliValue()%1000 != 0 || lim.Cmp(resource.MustParse("1")) < 0):
						bad = append(bad, fmt.Sprintf("container %s: CPU %s is not a whole CPU", c.Name, lim.String()))
					}
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) {
				agentPod(m).Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
			},
			func(m *manifests) {
				c := &agentPod(m).Containers[0]
				c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
				c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1500m")
			},
			func(m *manifests) { delete(agentPod(m).Containers[0].Resources.Limits, corev1.ResourceMemory) },
		},
	},
	{
		name: "agent and endpoint share the hostPath " + endpointDir + ", the endpoint nothing else of the host",
		check: func(m *manifests) (bad []string) {
			if !mountsHostPath(agentPod(m), sharedDir, sharedDir) {
				bad = append(bad, fmt.Sprintf("agent: no hostPath %s mounted at %s", sharedDir, sharedDir))
			}
			ep := endpointPod(m)
			if !mountsHostPath(ep, endpointDir, sharedDir) {
				bad = append(bad, fmt.Sprintf("endpoint: no hostPath %s mounted at %s", endpointDir, sharedDir))
			}
			for _, v := range ep.Volumes {
				if v.HostPath != nil && path.Clean(v.HostPath.Path) != endpointDir {
					// The agent's state (spool, servers' records) is below
					// sharedDir: a pod on the pod network that could write
					// there could hang or steer the privileged agent.
					bad = append(bad, fmt.Sprintf("endpoint mounts the hostPath %s, more than %s", v.HostPath.Path, endpointDir))
				}
			}
			args := strings.Join(agentPod(m).Containers[0].Args, " ")
			if !strings.Contains(args, "--endpoint-socket="+endpointDir+"/endpoint.sock") {
				bad = append(bad, "agent's --endpoint-socket is not "+endpointDir+"/endpoint.sock")
			}
			if !strings.Contains(args, "--state-dir="+sharedDir+"/state") {
				bad = append(bad, "agent's --state-dir is not "+sharedDir+"/state")
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentPod(m).Volumes[0].HostPath.Path = "/run/other" },
			func(m *manifests) { endpointPod(m).Containers[0].VolumeMounts[0].MountPath = "/run/x" },
			func(m *manifests) {
				endpointPod(m).Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
			},
			func(m *manifests) { endpointPod(m).Volumes[0].HostPath.Path = sharedDir },
			func(m *manifests) {
				ps := endpointPod(m)
				ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
			func(m *manifests) {
				c := &agentPod(m).Containers[0]
				c.Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return strings.HasPrefix(a, "--endpoint-socket") })
			},
		},
	},
	{
		name: "agent and endpoint get no API token",
		check: func(m *manifests) (bad []string) {
			for _, name := range []string{agentName, endpointName} {
				sa := find[*corev1.ServiceAccount](m, name)
				if sa == nil || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
					bad = append(bad, "ServiceAccount "+name+": automountServiceAccountToken is not false")
				}
				ds := find[*appsv1.DaemonSet](m, name)
				if ds == nil {
					bad = append(bad, "no DaemonSet "+name)
					continue
				}
				ps := ds.Spec.Template.Spec
				if ps.ServiceAccountName != name {
					bad = append(bad, fmt.Sprintf("DaemonSet %s runs as ServiceAccount %q", name, ps.ServiceAccountName))
				}
				if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
					bad = append(bad, "DaemonSet "+name+": automountServiceAccountToken is not false")
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentPod(m).AutomountServiceAccountToken = nil },
			func(m *manifests) { *find[*corev1.ServiceAccount](m, endpointName).AutomountServiceAccountToken = true },
			func(m *manifests) { endpointPod(m).ServiceAccountName = coordinator },
		},
	},
	{
		name: "endpoint on the pod network, unprivileged, serving the agent's socket",
		check: func(m *manifests) (bad []string) {
			ps := endpointPod(m)
			if ps.HostNetwork || ps.HostPID || ps.HostIPC {
				bad = append(bad, "endpoint shares a host namespace")
			}
			for _, c := range ps.Containers {
				sc := c.SecurityContext
				switch {
				case sc == nil:
					bad = append(bad, c.Name+": no securityContext")
				case sc.Privileged != nil && *sc.Privileged:
					bad = append(bad, c.Name+": privileged")
				case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
					bad = append(bad, c.Name+": allowPrivilegeEscalation is not false")
				case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
					bad = append(bad, c.Name+": capabilities not all dropped")
				}
				if got := strings.Join(append(slices.Clone(c.Command), c.Args...), " "); got != "agent endpoint --socket="+sharedDir+"/endpoint.sock" {
					bad = append(bad, fmt.Sprintf("%s runs %q", c.Name, got))
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { endpointPod(m).HostNetwork = true },
			func(m *manifests) { p := true; endpointPod(m).Containers[0].SecurityContext.Privileged = &p },
			func(m *manifests) {
				endpointPod(m).Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
			},
			func(m *manifests) { endpointPod(m).Containers[0].Args = []string{"endpoint"} },
		},
	},
}

func TestInvariants(t *testing.T) {
	m := load(t)
	for _, inv := range invariants {
		t.Run(inv.name, func(t *testing.T) {
			for _, b := range inv.check(m) {
				t.Error(b)
			}
		})
	}
}

// TestInvariantsCatchBreakage breaks the manifests, once per breakage, and
// wants the invariant to notice.
func TestInvariantsCatchBreakage(t *testing.T) {
	for _, inv := range invariants {
		t.Run(inv.name, func(t *testing.T) {
			if len(inv.breaks) == 0 {
				t.Fatal("no breakage to prove the check")
			}
			for i, brk := range inv.breaks {
				m := load(t)
				brk(m)
				if got := inv.check(m); len(got) == 0 {
					t.Errorf("breakage %d went unnoticed", i)
				}
			}
		})
	}
}
