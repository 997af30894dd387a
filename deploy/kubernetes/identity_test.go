package kubernetes

import (
	"fmt"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// nodeURIPrefix is mtls.NodeURIPrefix: the URI SAN of an agent certificate
// that names its node.
const nodeURIPrefix = "spiffe://meshperf/node/"

// identityAudience is the audience of the agents' identity tokens
// (coordinator/identity.Audience).
const identityAudience = "meshperf"

func init() { invariants = append(invariants, identityInvariants...) }

// identityInvariants are the properties of per-node identity: the agent
// presents a projected token only the coordinator accepts, the coordinator
// checks it, and agent certificates name one node.
var identityInvariants = []invariant{
	{
		name: "agent presents a projected token of audience " + identityAudience + " with --identity-token-file",
		check: func(m *manifests) (bad []string) {
			ps := agentPod(m)
			var file string // the token's path in the container
			for _, v := range ps.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					t := src.ServiceAccountToken
					if t == nil || t.Audience != identityAudience {
						continue
					}
					if t.ExpirationSeconds == nil || *t.ExpirationSeconds < 600 || *t.ExpirationSeconds > 3600 {
						bad = append(bad, fmt.Sprintf("volume %s: expirationSeconds %v, want 600..3600 (the kubelet renews it)", v.Name, t.ExpirationSeconds))
					}
					for _, c := range ps.Containers {
						i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == v.Name })
						if i < 0 {
							bad = append(bad, fmt.Sprintf("container %s does not mount volume %s", c.Name, v.Name))
							continue
						}
						if !c.VolumeMounts[i].ReadOnly {
							bad = append(bad, fmt.Sprintf("container %s mounts volume %s writable", c.Name, v.Name))
						}
						file = path.Join(c.VolumeMounts[i].MountPath, t.Path)
					}
				}
			}
			if file == "" {
				return append(bad, "no projected serviceAccountToken volume of audience "+identityAudience+" mounted in the agent")
			}
			for _, c := range ps.Containers {
				if !slices.Contains(c.Args, "--identity-token-file="+file) {
					bad = append(bad, fmt.Sprintf("container %s: args %q lack --identity-token-file=%s", c.Name, c.Args, file))
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentToken(m).Audience = "" },
			func(m *manifests) { agentToken(m).ExpirationSeconds = nil },
			func(m *manifests) { e := int64(86400); agentToken(m).ExpirationSeconds = &e },
			func(m *manifests) { agentToken(m).Path = "other" },
			func(m *manifests) { c := &agentPod(m).Containers[0]; c.Args = slices.DeleteFunc(c.Args, isTokenFlag) },
			func(m *manifests) {
				c := &agentPod(m).Containers[0]
				c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "identity" })
			},
		},
	},
	{
		name: "no agent or endpoint token for the API server",
		check: func(m *manifests) (bad []string) {
			for _, ps := range []*corev1.PodSpec{agentPod(m), endpointPod(m)} {
				for _, v := range ps.Volumes {
					if v.Projected == nil {
						continue
					}
					for _, src := range v.Projected.Sources {
						if t := src.ServiceAccountToken; t != nil && t.Audience != identityAudience {
							bad = append(bad, fmt.Sprintf("%s: volume %s projects a token of audience %q, which the API server would take", ps.Containers[0].Name, v.Name, t.Audience))
						}
					}
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { agentToken(m).Audience = "" },
			func(m *manifests) { agentToken(m).Audience = "https://kubernetes.default.svc" },
		},
	},
	{
		name: "coordinator checks the agents' identity tokens against the agent DaemonSet",
		check: func(m *manifests) (bad []string) {
			if ds := find[*appsv1.DaemonSet](m, agentName); ds == nil || ds.Namespace != namespace {
				bad = append(bad, "no DaemonSet "+agentName+" in "+namespace)
			}
			for _, c := range coordinatorPod(m).Containers {
				flags := map[string]string{}
				for _, a := range c.Args {
					k, v, _ := strings.Cut(a, "=")
					flags[k] = v
				}
				if _, ok := flags["--kubernetes"]; !ok {
					bad = append(bad, c.Name+": no --kubernetes (the agents' tokens would go unchecked)")
				}
				if v, ok := flags["--agent-identity"]; ok && v != "auto" && v != "token" && v != "token-or-cert" {
					bad = append(bad, fmt.Sprintf("%s: --agent-identity=%s, want the token checked", c.Name, v))
				}
				if v, ok := flags["--agent-daemonset"]; ok && v != agentName {
					bad = append(bad, fmt.Sprintf("%s: --agent-daemonset=%s, the agents are %s", c.Name, v, agentName))
				}
				if v, ok := flags["--kube-namespace"]; ok && v != namespace {
					bad = append(bad, fmt.Sprintf("%s: --kube-namespace=%s, the agents are in %s", c.Name, v, namespace))
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) {
				c := &coordinatorPod(m).Containers[0]
				c.Args = slices.DeleteFunc(c.Args, isArg("--kubernetes"))
			},
			func(m *manifests) {
				c := &coordinatorPod(m).Containers[0]
				c.Args = append(c.Args, "--agent-identity=none")
			},
			func(m *manifests) {
				c := &coordinatorPod(m).Containers[0]
				c.Args = append(c.Args, "--agent-daemonset=other")
			},
		},
	},
	{
		name: "agent certificates with URIs name one node each, for client auth",
		check: func(m *manifests) (bad []string) {
			for _, c := range all[*certificate](m) {
				var nodes []string
				for _, u := range c.Spec.URIs {
					if n, ok := strings.CutPrefix(u, nodeURIPrefix); ok {
						nodes = append(nodes, n)
					}
				}
				switch {
				case len(c.Spec.URIs) == 0:
					continue
				case len(nodes) != 1 || nodes[0] == "" || strings.Contains(nodes[0], "/"):
					bad = append(bad, fmt.Sprintf("Certificate %s: URIs %q, want one %sNODE", c.Name, c.Spec.URIs, nodeURIPrefix))
				}
				if !slices.Contains(c.Spec.Usages, "client auth") {
					bad = append(bad, fmt.Sprintf("Certificate %s: usages %q lack client auth", c.Name, c.Spec.Usages))
				}
			}
			if !m.rendered && !slices.ContainsFunc(all[*certificate](m), func(c *certificate) bool { return len(c.Spec.URIs) > 0 }) {
				bad = append(bad, "no example of a node's agent Certificate with its URI SAN")
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { nodeCert(m).Spec.URIs = append(nodeCert(m).Spec.URIs, nodeURIPrefix+"node-2") },
			func(m *manifests) { nodeCert(m).Spec.URIs = []string{"spiffe://other/node/node-1"} },
			func(m *manifests) { nodeCert(m).Spec.Usages = []string{"server auth"} },
			func(m *manifests) { nodeCert(m).Spec.URIs = nil },
		},
	},
}

// agentToken is the agent's projected token of identityAudience; a
// placeholder if there is none.
func agentToken(m *manifests) *corev1.ServiceAccountTokenProjection {
	for _, v := range agentPod(m).Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.Audience == identityAudience {
				return src.ServiceAccountToken
			}
		}
	}
	return &corev1.ServiceAccountTokenProjection{}
}

// nodeCert is the first Certificate with URIs; a placeholder if none.
func nodeCert(m *manifests) *certificate {
	for _, c := range all[*certificate](m) {
		if len(c.Spec.URIs) > 0 {
			return c
		}
	}
	return &certificate{}
}

func isTokenFlag(a string) bool { return strings.HasPrefix(a, "--identity-token-file") }

func isArg(name string) func(string) bool {
	return func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") }
}
