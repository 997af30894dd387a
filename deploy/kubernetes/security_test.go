package kubernetes

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	gossipSecret   = "meshperf-gossip"
	metricsPort    = 9090
	grpcPort       = 7700
	prometheusNS   = "monitoring"
	prometheusName = "prometheus"
)

// flagValue is the value of --name=VALUE among args; "" if absent.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// secretAt reports the Secret mounted (read-only) in c of ps at the
// directory holding file; "" if none.
func secretAt(ps *corev1.PodSpec, c corev1.Container, file string) string {
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Dir(file) || !vm.ReadOnly {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

// coordinatorPolicies are the NetworkPolicies that select the coordinator
// pod's labels.
func coordinatorPolicies(m *manifests) []*networkingv1.NetworkPolicy {
	labels := coordinatorPodLabels(m)
	var out []*networkingv1.NetworkPolicy
	for _, np := range all[*networkingv1.NetworkPolicy](m) {
		sel := np.Spec.PodSelector.MatchLabels
		if len(sel) == 0 {
			continue // every pod: not a policy of the coordinator's own
		}
		match := true
		for k, v := range sel {
			match = match && labels[k] == v
		}
		if match && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			out = append(out, np)
		}
	}
	return out
}

// coordinatorPodLabels are the labels of the coordinator Deployment's pods.
func coordinatorPodLabels(m *manifests) map[string]string {
	if d := find[*appsv1.Deployment](m, coordinator); d != nil {
		return d.Spec.Template.Labels
	}
	return nil
}

// allowsPort reports whether rule lets TCP traffic to the port (by number
// or by the coordinator container's port name) through.
func allowsPort(m *manifests, rule networkingv1.NetworkPolicyIngressRule, port int32) bool {
	if len(rule.Ports) == 0 {
		return true // every port
	}
	names := map[string]int32{}
	for _, c := range coordinatorPod(m).Containers {
		for _, p := range c.Ports {
			names[p.Name] = p.ContainerPort
		}
	}
	for _, p := range rule.Ports {
		if p.Port == nil {
			return true
		}
		if p.Port.Type == intstr.Int && p.Port.IntVal == port || p.Port.Type == intstr.String && names[p.Port.StrVal] == port {
			return true
		}
	}
	return false
}

var securityInvariants = []invariant{
	{
		name: "agent gossip encrypted with the keys of Secret meshperf-gossip",
		check: func(m *manifests) (bad []string) {
			ps := agentPod(m)
			for _, c := range ps.Containers {
				f := flagValue(c.Args, "gossip-key-file")
				if f == "" {
					bad = append(bad, "container "+c.Name+": no --gossip-key-file (gossip in clear)")
					continue
				}
				if s := secretAt(ps, c, f); s != gossipSecret {
					bad = append(bad, fmt.Sprintf("container %s: --gossip-key-file=%s is not in a read-only mount of Secret %s (found %q)", c.Name, f, gossipSecret, s))
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) {
				c := &agentPod(m).Containers[0]
				c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--gossip-key-file=") })
			},
			func(m *manifests) {
				for i := range agentPod(m).Volumes {
					if v := &agentPod(m).Volumes[i]; v.Secret != nil && v.Secret.SecretName == gossipSecret {
						v.Secret.SecretName = "other"
					}
				}
			},
			func(m *manifests) {
				c := &agentPod(m).Containers[0]
				c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == "/etc/meshperf/gossip" })
			},
		},
	},
	{
		name: "coordinator metrics port reached only by Prometheus pods (NetworkPolicy)",
		check: func(m *manifests) (bad []string) {
			nps := coordinatorPolicies(m)
			if len(nps) == 0 {
				return []string{"no ingress NetworkPolicy selects the coordinator's pods"}
			}
			grpcOpen := false
			for _, np := range nps {
				for i, rule := range np.Spec.Ingress {
					if allowsPort(m, rule, grpcPort) {
						grpcOpen = true
					}
					if !allowsPort(m, rule, metricsPort) {
						continue
					}
					if len(rule.From) == 0 {
						bad = append(bad, fmt.Sprintf("NetworkPolicy %s: ingress[%d] lets anyone reach the metrics port", np.Name, i))
					}
					for j, peer := range rule.From {
						ns, pod := peer.NamespaceSelector, peer.PodSelector
						switch {
						case peer.IPBlock != nil:
							bad = append(bad, fmt.Sprintf("NetworkPolicy %s: ingress[%d].from[%d]: an ipBlock reaches the metrics port", np.Name, i, j))
						case ns == nil || len(ns.MatchLabels)+len(ns.MatchExpressions) == 0:
							bad = append(bad, fmt.Sprintf("NetworkPolicy %s: ingress[%d].from[%d]: no namespace selector (every namespace, or only meshperf's)", np.Name, i, j))
						case pod == nil || len(pod.MatchLabels)+len(pod.MatchExpressions) == 0:
							bad = append(bad, fmt.Sprintf("NetworkPolicy %s: ingress[%d].from[%d]: every pod of the namespace", np.Name, i, j))
						case ns.MatchLabels["kubernetes.io/metadata.name"] != prometheusNS || pod.MatchLabels["app.kubernetes.io/name"] != prometheusName:
							bad = append(bad, fmt.Sprintf("NetworkPolicy %s: ingress[%d].from[%d]: not the documented default (namespace %s, pods app.kubernetes.io/name=%s)",
								np.Name, i, j, prometheusNS, prometheusName))
						}
					}
				}
			}
			if !grpcOpen {
				bad = append(bad, "no NetworkPolicy rule lets the agents reach the coordinator's gRPC port")
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) { coordinatorPolicies(m)[0].Spec.Ingress[1].From = nil },
			func(m *manifests) { // the open rule names the metrics port
				p := intstr.FromString("metrics")
				coordinatorPolicies(m)[0].Spec.Ingress[0].Ports[0].Port = &p
			},
			func(m *manifests) { // and by number
				p := intstr.FromInt32(metricsPort)
				coordinatorPolicies(m)[0].Spec.Ingress[0].Ports = append(coordinatorPolicies(m)[0].Spec.Ingress[0].Ports, networkingv1.NetworkPolicyPort{Port: &p})
			},
			func(m *manifests) { coordinatorPolicies(m)[0].Spec.Ingress[0].Ports = nil }, // the open gRPC rule opens metrics too
			func(m *manifests) { coordinatorPolicies(m)[0].Spec.Ingress[1].From[0].NamespaceSelector = nil },
			func(m *manifests) { coordinatorPolicies(m)[0].Spec.Ingress[1].From[0].PodSelector = nil },
			func(m *manifests) {
				coordinatorPolicies(m)[0].Spec.Ingress[1].From = append(coordinatorPolicies(m)[0].Spec.Ingress[1].From,
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
			},
			func(m *manifests) {
				coordinatorPolicies(m)[0].Spec.PodSelector.MatchLabels = map[string]string{"app": "other"}
			},
			func(m *manifests) {
				coordinatorPolicies(m)[0].Spec.Ingress = coordinatorPolicies(m)[0].Spec.Ingress[1:]
			},
		},
	},
	{
		name: "cert-manager overlay: /metrics over TLS with a token, the web UI over TLS (its API takes the API token), probes over HTTPS",
		check: func(m *manifests) (bad []string) {
			var args []string
			schemes := map[string]string{}
			secrets := map[string]string{} // volume name -> secret
			mounts := map[string]string{}  // mount path -> volume name
			// A rendering has the patches applied: read the coordinator's pod.
			if m.rendered {
				ps := coordinatorPod(m)
				c := ps.Containers[0]
				if flagValue(c.Args, "tls-cert") == "" {
					return nil // no TLS in this rendering
				}
				args = c.Args
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p != nil && p.HTTPGet != nil {
						what := map[*corev1.Probe]string{c.ReadinessProbe: "readinessProbe", c.LivenessProbe: "livenessProbe"}[p]
						schemes["/spec/template/spec/containers/0/"+what+"/httpGet/scheme"] = string(p.HTTPGet.Scheme)
					}
				}
				for _, v := range ps.Volumes {
					if v.Secret != nil {
						secrets[v.Name] = v.Secret.SecretName
					}
				}
				for _, vm := range c.VolumeMounts {
					mounts[vm.MountPath] = vm.Name
				}
			}
			for f, ops := range m.patches {
				if !strings.HasPrefix(f, "cert-manager/") {
					continue
				}
				for _, op := range ops {
					switch {
					case op.Path == "/spec/template/spec/containers/0/args/-":
						if a, ok := op.Value.(string); ok {
							args = append(args, a)
						}
					case strings.HasSuffix(op.Path, "Probe/httpGet/scheme"):
						schemes[op.Path], _ = op.Value.(string)
					case op.Path == "/spec/template/spec/volumes/-":
						v, _ := op.Value.(map[string]any)
						sec, _ := v["secret"].(map[string]any)
						name, _ := v["name"].(string)
						secrets[name], _ = sec["secretName"].(string)
					case op.Path == "/spec/template/spec/containers/0/volumeMounts/-":
						v, _ := op.Value.(map[string]any)
						mp, _ := v["mountPath"].(string)
						mounts[mp], _ = v["name"].(string)
					}
				}
			}
			for _, flag := range []string{"metrics-tls-cert", "metrics-tls-key", "metrics-token-file", "web-tls-cert", "web-tls-key"} {
				if flagValue(args, flag) == "" {
					bad = append(bad, "the overlay passes no --"+flag)
				}
			}
			if f := flagValue(args, "metrics-token-file"); f != "" && secrets[mounts[path.Dir(f)]] != "meshperf-metrics-token" {
				bad = append(bad, fmt.Sprintf("--metrics-token-file=%s is not in a mount of Secret meshperf-metrics-token", f))
			}
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				if s := schemes["/spec/template/spec/containers/0/"+probe+"/httpGet/scheme"]; s != "HTTPS" {
					bad = append(bad, fmt.Sprintf("the coordinator's %s on the metrics port has scheme %q, want HTTPS", probe, s))
				}
			}
			return bad
		},
		breaks: []func(m *manifests){
			func(m *manifests) {
				f := "cert-manager/coordinator-metrics-patch.yaml"
				m.patches[f] = slices.DeleteFunc(m.patches[f], func(op jsonPatchOp) bool { return strings.HasSuffix(op.Path, "livenessProbe/httpGet/scheme") })
			},
			func(m *manifests) {
				f := "cert-manager/coordinator-metrics-patch.yaml"
				m.patches[f] = slices.DeleteFunc(m.patches[f], func(op jsonPatchOp) bool {
					a, _ := op.Value.(string)
					return strings.HasPrefix(a, "--metrics-token-file=")
				})
			},
			func(m *manifests) { delete(m.patches, "cert-manager/coordinator-metrics-patch.yaml") },
			func(m *manifests) { // the token without web TLS: the coordinator would refuse to start
				f := "cert-manager/coordinator-tls-patch.yaml"
				m.patches[f] = slices.DeleteFunc(m.patches[f], func(op jsonPatchOp) bool {
					a, _ := op.Value.(string)
					return strings.HasPrefix(a, "--web-tls-key=")
				})
			},
		},
	},
}

func TestSecurityInvariants(t *testing.T) {
	m := load(t)
	for _, inv := range securityInvariants {
		t.Run(inv.name, func(t *testing.T) {
			for _, b := range inv.check(m) {
				t.Error(b)
			}
		})
	}
}

func TestSecurityInvariantsCatchBreakage(t *testing.T) {
	for _, inv := range securityInvariants {
		t.Run(inv.name, func(t *testing.T) {
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
