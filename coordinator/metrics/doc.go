// Package metrics exports the coordinator's figures and its own health to
// Prometheus, from a registry of its own (never the global default one).
//
// The run manager feeds it (Metrics implements runs.Observer): every batch of
// results recorded and every run's start and end. What is read at scrape
// time (agents connected and known, the store file's size) is read then,
// through Config.Agents and Config.StorePath, never on every result.
//
// Figures are in base units, with the unit in the name, and labelled with
// testspec's names ("ping", "qperf_tcp_lat", ...; "host-host", "pod-pod", ...).
// By default there are O(nodes x tests x paths) series, never one per pair:
//
//	meshperf_node_latency_seconds{node,role,test,path}    gauge
//	meshperf_node_throughput_bps{node,role,test,path}     gauge
//	meshperf_node_results_total{node,role,test,path,status} counter
//	meshperf_node_loss_ratio{node,role,test,path}         gauge: 0..1
//
// role is "src" (the node ran the client) or "dst" (the node was the
// target). On the external paths (host-external, pod-external) the
// destination is an external target, not a node: those results count for
// their source node only (role "src", median over the targets), never
// under a target's name as a node. A node's figure is the median, over the node's peers in that
// role, of each pair's last figure: the headline of testcell.Headline (ping's
// median RTT, qperf's one-way latency, curl's total time, http_load's
// median time per request under load (ab's 50% figure) in seconds; qperf
// and iperf3 throughput in bit/s), the median of a test's results when it
// has several (a qperf sweep's sizes). latency_seconds holds tests where
// lower is better, throughput_bps those where higher is (testcell.HigherIsBetter).
// Only OK results set a figure: a failure counts in results_total under its
// status ("ok", "refused", "agent_unavailable", ...) and leaves the last
// figure as it was. loss_ratio is the median, over the node's peers in
// that role, of each pair's last packet loss (0..1) where a test measures
// one: ping (lost echoes) and iperf3_udp (lost datagrams); a ping that
// loses every echo fails, and shows in results_total, not here. A node that leaves the mesh keeps its series until the
// coordinator restarts.
//
// With Config.PerPair (coordinator serve --metrics-per-pair), each pair's
// last figure is exported too, O(nodes²) series (dst is the target's name
// on the external paths):
//
//	meshperf_pair_latency_seconds{src,dst,test,path}  gauge
//	meshperf_pair_throughput_bps{src,dst,test,path}   gauge
//	meshperf_pair_loss_ratio{src,dst,test,path}       gauge: 0..1
//
// The faults the newest continuous run localises (coordinator/alert and
// coordinator/diagnose), one series per finding, none when all is well:
// about a node (its kind includes egress-broken and pod-egress-broken, a
// node that cannot reach the external targets the others reach), or about
// an external target (external-down, external-http-down,
// external-icmp-blocked, external-partial), never under a node label: a
// target is no node.
//
//	meshperf_fault{node,kind}             gauge: 1
//	meshperf_external_fault{target,kind}  gauge: 1
//
// A series is deleted when its fault clears, and only then.
//
// meshperf's own health:
//
//	meshperf_agents_connected          gauge: agents with a live session
//	meshperf_agents_known              gauge: agents that ever registered
//	meshperf_agents_gossip_dead        gauge: nodes the agents' gossip declares dead or left
//	meshperf_gossip_partitions         gauge: nodes on which the coordinator and gossip disagree
//	meshperf_runs_active               gauge: runs in progress
//	meshperf_runs_total{state}         counter: ended runs by final state
//	meshperf_results_ingested_total    counter: results recorded; rate() is the ingest rate
//	meshperf_store_size_bytes          gauge: the bbolt file's size
//
// plus the Go runtime's go_* and the process's process_* metrics. Serve
// serves /metrics and /healthz (200 while serving).
package metrics
