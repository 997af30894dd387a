package kubernetes

import (
	_ "embed" // the coordinator's RBAC manifest
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// coordinatorRBACFile is the manifest of the coordinator's API access.
const coordinatorRBACFile = "base/coordinator-rbac.yaml"

//go:embed base/coordinator-rbac.yaml
var coordinatorRBAC []byte

// CoordinatorRole returns the Role of base/coordinator-rbac.yaml: what the
// coordinator may do in its namespace, where coordinator/kube keeps the
// per-node Services and EndpointSlices and watches the pod endpoints, and
// coordinator/identity reads the agents' pods and DaemonSet. It is decoded as strictly
// as this package's tests decode every manifest, so that a test of the
// coordinator can check each API call it makes against what the cluster
// grants.
func CoordinatorRole() (*rbacv1.Role, error) {
	return onlyOne[rbacv1.Role]("Role")
}

// CoordinatorClusterRole returns the ClusterRole of
// base/coordinator-rbac.yaml: what the coordinator may do cluster-wide
// (create tokenreviews, to check the agents' identity tokens; watch the
// Nodes, whose addresses a registration must carry), decoded as
// CoordinatorRole is.
func CoordinatorClusterRole() (*rbacv1.ClusterRole, error) {
	return onlyOne[rbacv1.ClusterRole]("ClusterRole")
}

// onlyOne decodes the one object of kind in coordinatorRBACFile.
func onlyOne[T any](kind string) (*T, error) {
	docs, err := documents(coordinatorRBACFile, coordinatorRBAC)
	if err != nil {
		return nil, err
	}
	var found []*T
	for _, d := range docs {
		if d.meta.APIVersion != rbacv1.SchemeGroupVersion.String() || d.meta.Kind != kind {
			continue
		}
		v := new(T)
		if err := decodeStrict(d.yaml, v); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", coordinatorRBACFile, d.index, kind, err)
		}
		found = append(found, v)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: %d %ss, want one", coordinatorRBACFile, len(found), kind)
	}
	return found[0], nil
}

// Allows reports whether rules grant verb on resource (no subresource) of
// API group (the core group is ""), matching wildcards as the API server's
// RBAC authorizer does. A rule limited to resourceNames does not count: it
// cannot grant list or create, and the coordinator's object names depend on
// its nodes.
func Allows(rules []rbacv1.PolicyRule, verb, group, resource string) bool {
	has := func(list []string, v, all string) bool { return slices.Contains(list, v) || slices.Contains(list, all) }
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && has(r.Verbs, verb, rbacv1.VerbAll) && has(r.APIGroups, group, rbacv1.APIGroupAll) &&
			has(r.Resources, resource, rbacv1.ResourceAll) {
			return true
		}
	}
	return false
}
