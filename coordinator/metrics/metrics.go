package metrics

import (
	"fmt"
	"log/slog"
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/lograte"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Roles of a node in a pair: the value of the role label.
const (
	// RoleSrc is the node that ran the client.
	RoleSrc = testspec.RoleSrc
	// RoleDst is the node the client measured against.
	RoleDst = testspec.RoleDst
)

// Config configures New.
type Config struct {
	// Agents is read at scrape time for meshperf_agents_connected and
	// meshperf_agents_known; nil means neither is exported.
	Agents Agents
	// StorePath is the bbolt file whose size, read at scrape time, is
	// meshperf_store_size_bytes; "" means no such gauge.
	StorePath string
	// PerPair adds the meshperf_pair_* gauges, one series per ordered node
	// pair, test and path: O(nodes²) series. False means per-node
	// aggregates only, O(nodes).
	PerPair bool
	// Probes is read at scrape time for the meshperf_probe_* series of the
	// continuous mesh; nil means none.
	Probes ProbeSource
	// Invalid is read at scrape time for meshperf_results_invalid_total:
	// the results and probe summaries whose figures failed the checks
	// (coordinator/sanity); nil means none is exported.
	Invalid *sanity.Counter
	// Logger receives scrape problems; nil means discard.
	Logger *slog.Logger
}

// Metrics holds the coordinator's Prometheus registry and the state behind
// its figures. It is safe for concurrent use; its observer methods never
// block on I/O.
type Metrics struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	refusals lograte.Bucket // bounds the warnings of refused scrapes

	accessMu sync.Mutex    // guards access and token (SetAccess, access.go)
	access   Access        // what /metrics asks of a scraper
	token    *metricsToken // nil: no token

	nodeLatency    *prometheus.GaugeVec   // node, role, test, path; seconds
	nodeThroughput *prometheus.GaugeVec   // node, role, test, path; bit/s
	nodeResults    *prometheus.CounterVec // node, role, test, path, status
	pairLatency    *prometheus.GaugeVec   // src, dst, test, path; nil unless PerPair
	pairThroughput *prometheus.GaugeVec   // src, dst, test, path; nil unless PerPair
	nodeLoss       *prometheus.GaugeVec   // node, role, test, path; ratio 0..1
	pairLoss       *prometheus.GaugeVec   // src, dst, test, path; nil unless PerPair
	faults         *prometheus.GaugeVec   // node, kind
	externalFaults *prometheus.GaugeVec   // target, kind
	faultsMu       sync.Mutex
	faultSet       map[faultKey]bool // the series faults and externalFaults have
	runsActive     prometheus.Gauge
	runsTotal      *prometheus.CounterVec // state
	ingested       prometheus.Counter

	mu sync.Mutex
	// last holds each pair's last figure twice, by source and by
	// destination: last[{n, role, test, path}][peer]. It is what the
	// per-node medians are recomputed from, in O(peers), on every batch.
	last map[nodeKey]map[string]float64
	// lastLoss is last for the loss ratios (loss.go).
	lastLoss map[nodeKey]map[string]float64
}

// nodeKey is one per-node series.
type nodeKey struct {
	node, role string
	test       measurev1.Test
	path       measurev1.Path
}

// faultKey is one series of meshperf_fault (target false: name is the
// node) or meshperf_external_fault (target true: name is the target).
type faultKey struct {
	target     bool
	name, kind string
}

// pairKey is one pair's figure.
type pairKey struct {
	src, dst string
	test     measurev1.Test
	path     measurev1.Path
}

var _ runs.Observer = (*Metrics)(nil)

// Names of the metric families that remote write (coordinator/remotewrite)
// sends too, under the same names and labels, so that a dashboard reads
// either source alike.
const (
	// PairLatency is a pair's latency or time figure, in seconds.
	PairLatency = "meshperf_pair_latency_seconds"
	// PairThroughput is a pair's throughput figure, in bits per second.
	PairThroughput = "meshperf_pair_throughput_bps"
	// PairLoss is a pair's packet loss, a ratio 0..1.
	PairLoss = "meshperf_pair_loss_ratio"
	// NodeLatency is the median of a node's pairs' latency figures.
	NodeLatency = "meshperf_node_latency_seconds"
	// NodeThroughput is the median of a node's pairs' throughput figures.
	NodeThroughput = "meshperf_node_throughput_bps"
	// Fault is 1 per fault a continuous run localises to a node.
	Fault = "meshperf_fault"
	// ExternalFault is 1 per fault a continuous run finds of an external
	// target.
	ExternalFault = "meshperf_external_fault"
)

// New returns Metrics with a registry of their own holding every collector
// described in the package comment.
func New(cfg Config) (*Metrics, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nodeLabels := []string{"node", "role", "test", "path"}
	pairLabels := []string{"src", "dst", "test", "path"}
	m := &Metrics{
		cfg: cfg, log: log, reg: prometheus.NewRegistry(),
		nodeLatency: gaugeVec(NodeLatency,
			"Median over the node's peers (as source or destination) of each pair's last latency or time figure, in seconds: ping median RTT, qperf one-way latency, HTTP total time.",
			nodeLabels),
		nodeThroughput: gaugeVec(NodeThroughput,
			"Median over the node's peers (as source or destination) of each pair's last throughput figure, in bits per second: qperf tcp_bw/udp_bw, iperf3 receiver throughput.",
			nodeLabels),
		nodeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshperf_node_results_total",
			Help: "Results recorded with the node as source or destination, by status (ok or the failure).",
		}, append(nodeLabels, "status")),
		nodeLoss: gaugeVec("meshperf_node_loss_ratio",
			"Median over the node's peers (as source or destination) of each pair's last packet loss, a ratio 0..1: ping's lost echoes, iperf3 UDP's lost datagrams.",
			nodeLabels),
		faults: gaugeVec(Fault,
			"1 for each fault the newest continuous run localises: the node its bad pairs have in common and the kind (pod-network, mtu-blackhole, icmp-blocked, bandwidth-degraded, latency-degraded, unreachable, agent-gone), or a node that cannot reach the external targets others reach (egress-broken, pod-egress-broken); no series when there is none.",
			[]string{"node", "kind"}),
		externalFaults: gaugeVec(ExternalFault,
			"1 for each fault of an external target the newest continuous run finds: the target's name and the kind (external-down, external-http-down, external-icmp-blocked, external-partial); no series when there is none.",
			[]string{"target", "kind"}),
		runsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshperf_runs_active",
			Help: "Runs in progress.",
		}),
		runsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshperf_runs_total",
			Help: "Runs ended, by final state (succeeded, failed, interrupted).",
		}, []string{"state"}),
		ingested: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshperf_results_ingested_total",
			Help: "Results recorded by the run manager; its rate is the ingest rate in results per second.",
		}),
		last: map[nodeKey]map[string]float64{}, lastLoss: map[nodeKey]map[string]float64{},
	}
	cs := []prometheus.Collector{
		m.nodeLatency, m.nodeThroughput, m.nodeResults, m.nodeLoss, m.faults, m.externalFaults, m.runsActive, m.runsTotal, m.ingested,
		&scrapeCollector{agents: cfg.Agents, storePath: cfg.StorePath, log: log},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	if cfg.Probes != nil {
		cs = append(cs, newProbeCollector(cfg.Probes))
	}
	if cfg.Invalid != nil {
		cs = append(cs, invalidCollector{cfg.Invalid})
	}
	if cfg.PerPair {
		m.pairLatency = gaugeVec(PairLatency,
			"The pair's last latency or time figure, in seconds: ping median RTT, qperf one-way latency, HTTP total time.",
			pairLabels)
		m.pairThroughput = gaugeVec(PairThroughput,
			"The pair's last throughput figure, in bits per second: qperf tcp_bw/udp_bw, iperf3 receiver throughput.",
			pairLabels)
		m.pairLoss = gaugeVec(PairLoss,
			"The pair's last packet loss, a ratio 0..1: ping's lost echoes, iperf3 UDP's lost datagrams.",
			pairLabels)
		cs = append(cs, m.pairLatency, m.pairThroughput, m.pairLoss)
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	// Final states start at 0, so that rate() and increase() see the
	// first run of each.
	for _, s := range []measurev1.RunState{measurev1.RunState_RUN_STATE_SUCCEEDED, measurev1.RunState_RUN_STATE_FAILED, measurev1.RunState_RUN_STATE_INTERRUPTED,
		measurev1.RunState_RUN_STATE_CANCELED} {
		m.runsTotal.WithLabelValues(testspec.RunStateName(s))
	}
	return m, nil
}

// Registry returns the registry that Handler serves, for tests and for
// embedding in another exporter.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetFaults replaces the meshperf_fault series with one per finding about
// a node, and the meshperf_external_fault series with one per finding
// about an external target (see coordinator/alert); fs is not kept.
func (m *Metrics) SetFaults(fs []diagnose.Finding) {
	m.faultsMu.Lock()
	defer m.faultsMu.Unlock()
	now := map[faultKey]bool{}
	for _, f := range fs {
		k := faultKey{name: f.Node, kind: string(f.Kind)}
		if f.Target != "" {
			k = faultKey{target: true, name: f.Target, kind: string(f.Kind)}
		}
		now[k] = true
		m.faultGauge(k).WithLabelValues(k.name, k.kind).Set(1)
	}
	// Delete only what cleared: a scrape never sees a persisting fault
	// vanish (which would restart an alert's "for" timer).
	for k := range m.faultSet {
		if !now[k] {
			m.faultGauge(k).DeleteLabelValues(k.name, k.kind)
		}
	}
	m.faultSet = now
}

// faultGauge is the gauge of k's series.
func (m *Metrics) faultGauge(k faultKey) *prometheus.GaugeVec {
	if k.target {
		return m.externalFaults
	}
	return m.faults
}

// RunStarted counts a run in progress (meshperf_runs_active).
func (m *Metrics) RunStarted(string) { m.runsActive.Inc() }

// RunEnded counts a run out of progress and into meshperf_runs_total under
// its final state.
func (m *Metrics) RunEnded(_ string, state measurev1.RunState) {
	m.runsActive.Dec()
	m.runsTotal.WithLabelValues(testspec.RunStateName(state)).Inc()
}

// Recorded takes a batch of results: it counts each result for its source
// and its destination (for the source alone on the external paths, whose
// destination is a target, not a node), and sets each pair's figure (the median of the
// batch's OK headlines for that pair, test and path) and the per-node
// medians it changes, and likewise each pair's loss ratio (loss.go). Failed results set no figure. results are not
// modified or kept.
func (m *Metrics) Recorded(results []*measurev1.Result) {
	m.ingested.Add(float64(len(results)))
	figures, losses := map[pairKey][]float64{}, map[pairKey][]float64{}
	for _, r := range results {
		k := pairKey{src: r.GetSrcNode(), dst: r.GetDstNode(), test: r.GetSpec().GetTest(), path: r.GetPath()}
		test, path, status := testspec.Name(k.test), testspec.PathName(k.path), testspec.StatusName(r.GetStatus())
		for _, e := range testspec.DestinationOf(k.path, k.dst).Ends(k.src) { // a target is no node: src alone
			m.nodeResults.WithLabelValues(e.Node, e.Role, test, path, status).Inc()
		}
		if r.GetStatus() != measurev1.Status_STATUS_OK || r.GetMetrics() == nil {
			continue
		}
		if v := testcell.Headline(r); !math.IsNaN(v) && !math.IsInf(v, 0) {
			figures[k] = append(figures[k], v)
		}
		if v, ok := lossRatio(r); ok {
			losses[k] = append(losses[k], v)
		}
	}
	if len(figures) == 0 && len(losses) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, vs := range figures {
		v := stats.FiniteMedian(vs)
		if m.cfg.PerPair {
			m.pairGauge(k.test).WithLabelValues(k.src, k.dst, testspec.Name(k.test), testspec.PathName(k.path)).Set(v)
		}
		for _, e := range testspec.DestinationOf(k.path, k.dst).Ends(k.src) {
			m.setLast(nodeKey{node: e.Node, role: e.Role, test: k.test, path: k.path}, e.Peer, v)
		}
	}
	m.recordLosses(losses)
}

// setLast records peer's last figure in nk's series and sets the series
// to the median over nk's peers. Caller holds m.mu.
func (m *Metrics) setLast(nk nodeKey, peer string, v float64) {
	setMedian(m.last, m.nodeGauge(nk.test), nk, peer, v)
}

// setMedian records peer's last figure v in last[nk] and sets nk's series
// of g to the median over nk's peers. Caller holds m.mu.
func setMedian(last map[nodeKey]map[string]float64, g *prometheus.GaugeVec, nk nodeKey, peer string, v float64) {
	peers := last[nk]
	if peers == nil {
		peers = map[string]float64{}
		last[nk] = peers
	}
	peers[peer] = v
	vs := make([]float64, 0, len(peers))
	for _, x := range peers {
		vs = append(vs, x)
	}
	g.WithLabelValues(nk.node, nk.role, testspec.Name(nk.test), testspec.PathName(nk.path)).Set(stats.FiniteMedian(vs))
}

// nodeGauge is the per-node gauge of test's unit.
func (m *Metrics) nodeGauge(test measurev1.Test) *prometheus.GaugeVec {
	if testcell.HigherIsBetter(test) {
		return m.nodeThroughput
	}
	return m.nodeLatency
}

// pairGauge is the per-pair gauge of test's unit; only with PerPair.
func (m *Metrics) pairGauge(test measurev1.Test) *prometheus.GaugeVec {
	if testcell.HigherIsBetter(test) {
		return m.pairThroughput
	}
	return m.pairLatency
}

// gaugeVec is a gauge family named name, with help and labels.
func gaugeVec(name, help string, labels []string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}
