package kubernetes

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// checkRBAC allows the coordinator, in its namespace, the verbs
// coordinator/kube calls on services and endpointslices, and get, list
// and watch on pods (coordinator/identity reads the pod of an agent's
// token; the address check watches the pod endpoints), and get on
// daemonsets (the agent DaemonSet's UID, which the token's pod's
// controller must have); cluster-wide,
// create on tokenreviews and list and watch on nodes alone, in its one
// ClusterRole (the coordinator's tests check its calls against the roles
// both ways); nothing to anyone else.
func checkRBAC(m *manifests) (bad []string) {
	write := []string{"get", "list", "watch", "create", "update", "delete"}
	read := []string{"list", "watch"}
	nsAllowed := map[string][]string{"/services": write, "discovery.k8s.io/endpointslices": write, "/pods": {"get", "list", "watch"}, "apps/daemonsets": {"get"}}
	clusterAllowed := map[string][]string{"authentication.k8s.io/tokenreviews": {"create"}, "/nodes": read}
	checkRules := func(who string, rules []rbacv1.PolicyRule, allowed map[string][]string) {
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 {
				bad = append(bad, who+": nonResourceURLs")
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					verbs, ok := allowed[g+"/"+res]
					if !ok {
						bad = append(bad, fmt.Sprintf("%s: resource %q in group %q", who, res, g))
						continue
					}
					for _, v := range r.Verbs {
						if !slices.Contains(verbs, v) {
							bad = append(bad, fmt.Sprintf("%s: verb %q on %q in group %q", who, v, res, g))
						}
					}
				}
			}
		}
	}
	for _, r := range all[*rbacv1.Role](m) {
		checkRules("Role "+r.Name, r.Rules, nsAllowed)
	}
	for _, r := range all[*rbacv1.ClusterRole](m) {
		if r.Name != coordinator {
			bad = append(bad, "ClusterRole "+r.Name+": the coordinator needs one ClusterRole, "+coordinator)
		}
		checkRules("ClusterRole "+r.Name, r.Rules, clusterAllowed)
	}
	subjectsOK := func(who string, subjects []rbacv1.Subject) {
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind || s.Name != coordinator || s.Namespace != namespace {
				bad = append(bad, fmt.Sprintf("%s: binds %s %s/%s (only the coordinator talks to the API)", who, s.Kind, s.Namespace, s.Name))
			}
		}
	}
	for _, b := range all[*rbacv1.RoleBinding](m) {
		if b.RoleRef.Kind != "Role" || find[*rbacv1.Role](m, b.RoleRef.Name) == nil {
			bad = append(bad, fmt.Sprintf("RoleBinding %s: binds %s %s, not a Role of these manifests", b.Name, b.RoleRef.Kind, b.RoleRef.Name))
		}
		subjectsOK("RoleBinding "+b.Name, b.Subjects)
	}
	for _, b := range all[*rbacv1.ClusterRoleBinding](m) {
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != coordinator || find[*rbacv1.ClusterRole](m, b.RoleRef.Name) == nil {
			bad = append(bad, fmt.Sprintf("ClusterRoleBinding %s: binds %s %s cluster-wide, not the ClusterRole %s of these manifests", b.Name, b.RoleRef.Kind, b.RoleRef.Name, coordinator))
		}
		subjectsOK("ClusterRoleBinding "+b.Name, b.Subjects)
	}
	return bad
}
