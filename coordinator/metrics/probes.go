package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/coordinator/diagnose"
)

// ProbeStatus is the state of the continuous mesh at one moment.
type ProbeStatus struct {
	// Reports, Summaries and Batches count the agents' probe reports
	// stored since the coordinator started, their summaries, and the store
	// transactions that wrote them; Refused the reports the checks or the
	// store refused, Busy those not taken for a full queue, WriteErrors
	// the failed transactions.
	Reports, Summaries, Batches, Refused, Busy, WriteErrors uint64
	// Resent counts the reports of Reports that were stored already
	// (agents' resends after a reconnect).
	Resent uint64
	// Peers is the number of nodes in the probe plans, and PlansAcked how
	// many connected agents acknowledged a plan.
	Peers, PlansAcked int
	// Coverage is the share (0..1) of the ordered pairs x paths x kinds of
	// the plans that the agents reported on in the last report interval.
	Coverage float64
	// Faults are the faults the probe judge holds after the last report
	// period it judged (diagnose.ProbeJudge).
	Faults []diagnose.Finding
	// JudgeSeconds is how long judging the last report period took.
	JudgeSeconds float64
}

// ProbeSource gives the continuous mesh's status at scrape time; it must
// be cheap (O(nodes) at most).
type ProbeSource interface {
	ProbeStatus() ProbeStatus
}

// probeCollector exports a ProbeSource.
type probeCollector struct {
	src   ProbeSource
	descs map[string]*prometheus.Desc
}

func newProbeCollector(src ProbeSource) *probeCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &probeCollector{src: src, descs: map[string]*prometheus.Desc{
		"reports":      d("meshperf_probe_reports_total", "Agent probe reports stored (or found stored already) since the coordinator started."),
		"resent":       d("meshperf_probe_reports_resent_total", "Agent probe reports of meshperf_probe_reports_total found stored already: resends after a reconnect."),
		"summaries":    d("meshperf_probe_summaries_total", "Interval summaries (one destination, path and probe kind) in the stored probe reports."),
		"batches":      d("meshperf_probe_batches_total", "Store transactions that wrote probe reports (group commit)."),
		"refused":      d("meshperf_probe_reports_refused_total", "Probe reports refused by the checks or the store, and dropped."),
		"busy":         d("meshperf_probe_reports_busy_total", "Probe reports not taken because the ingest queue was full (their agents send them again)."),
		"write_errors": d("meshperf_probe_write_errors_total", "Failed store transactions of probe reports (their agents send them again)."),
		"peers":        d("meshperf_probe_plan_peers", "Nodes in the probe plans."),
		"acked":        d("meshperf_probe_plans_acknowledged", "Connected agents that acknowledged a probe plan."),
		"coverage":     d("meshperf_probe_coverage_ratio", "Share (0..1) of the ordered node pairs x paths x probe kinds of the plans reported on in the last report interval."),
		"judge":        d("meshperf_probe_judge_seconds", "Time the coordinator took to judge the last report period of the continuous mesh."),
		"fault": prometheus.NewDesc("meshperf_probe_fault",
			"1 for each node the continuous probes' judge holds at fault after the last report period it judged, with the kind (unreachable, pod-network, icmp-blocked, mtu-blackhole, agent-gone, latency-degraded); no series when there is none.",
			[]string{"node", "kind"}, nil),
	}}
}

func (c *probeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *probeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.ProbeStatus()
	counter := func(k string, v uint64) {
		ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.CounterValue, float64(v))
	}
	gauge := func(k string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.GaugeValue, v)
	}
	counter("reports", s.Reports)
	counter("resent", s.Resent)
	counter("summaries", s.Summaries)
	counter("batches", s.Batches)
	counter("refused", s.Refused)
	counter("busy", s.Busy)
	counter("write_errors", s.WriteErrors)
	gauge("peers", float64(s.Peers))
	gauge("acked", float64(s.PlansAcked))
	gauge("coverage", s.Coverage)
	gauge("judge", s.JudgeSeconds)
	for _, f := range s.Faults {
		ch <- prometheus.MustNewConstMetric(c.descs["fault"], prometheus.GaugeValue, 1, f.Node, string(f.Kind))
	}
}
