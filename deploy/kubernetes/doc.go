// Package kubernetes holds meshperf's Kubernetes manifests: a kustomize base
// (base/, installed by `kubectl apply -k deploy/kubernetes`) and an overlay
// with mutual TLS issued by cert-manager (cert-manager/). Its tests
// decode every manifest strictly into its Kubernetes API type and check the
// invariants the agent and the coordinator rely on (host network and
// Guaranteed QoS for the agent, one coordinator with its volume, RBAC no
// wider than needed); then render the base, the overlay and the
// monitoring component with kustomize's API library and the Helm chart
// deploy/helm/meshperf with helm template, check the same invariants on
// each rendering, and want the chart to render what kustomize renders.
// Its only code, CoordinatorRole, CoordinatorClusterRole
// and Allows, lets the coordinator's tests check the API calls it makes
// against the roles it is deployed with.
package kubernetes
