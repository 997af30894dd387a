// Package monitoring is meshperf's kustomize Component for the Prometheus
// Operator and Grafana (kustomization.yaml, included with
// `components: [monitoring]`): a ServiceMonitor for the coordinator's
// metrics port, the alerting rules as a PrometheusRule, and the Grafana
// dashboard (meshperf-dashboard.json) as a ConfigMap that Grafana's
// dashboard sidecar loads.
//
// Its code reads the two files that carry PromQL, embedded: Rules turns the
// PrometheusRule's spec.groups, the one copy of the rules, into a plain
// Prometheus rules file (for promtool and for a Prometheus without the
// Operator), and Queries lists every PromQL expression of the dashboard,
// with Expand to fill in its template variables. Its tests run the real
// promtool on both and, as root, a real Prometheus scraping a lab's
// coordinator (deploy/lab/cluster) through deploy/lab/forward.
package monitoring
