package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/coordinator/sanity"
)

var invalidDesc = prometheus.NewDesc("meshperf_results_invalid_total",
	"Results (source run) and continuous probe summaries (source probe) whose figures failed the coordinator's checks and were stored as invalid, not as measurements, by reason (not_finite, negative, out_of_bounds, inconsistent).",
	[]string{"source", "reason"}, nil)

// invalidCollector exports a sanity.Counter: every source and reason, 0
// included, so that rate() sees the first failure.
type invalidCollector struct{ c *sanity.Counter }

func (c invalidCollector) Describe(ch chan<- *prometheus.Desc) { ch <- invalidDesc }

func (c invalidCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range sanity.Sources {
		for _, r := range sanity.Reasons {
			ch <- prometheus.MustNewConstMetric(invalidDesc, prometheus.CounterValue, float64(c.c.Get(s, r)), string(s), string(r))
		}
	}
}
