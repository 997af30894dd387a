package metrics

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// Agents is what the metrics read of the agent registry, at scrape time
// only; *registry.Registry satisfies it. Agents must be safe for
// concurrent use, return quickly, and list every agent that ever
// registered with Connected set for those with a live session. The caller
// does not modify the agents.
type Agents interface {
	Agents() []*meshv1.Agent
}

var (
	agentsConnectedDesc = prometheus.NewDesc("meshperf_agents_connected",
		"Agents with a live session to the coordinator.", nil, nil)
	agentsKnownDesc = prometheus.NewDesc("meshperf_agents_known",
		"Agents that ever registered, connected or not.", nil, nil)
	gossipDeadDesc = prometheus.NewDesc("meshperf_agents_gossip_dead",
		"Nodes that the agents' gossip declares dead or left (their tests fail as agent_unavailable).", nil, nil)
	partitionsDesc = prometheus.NewDesc("meshperf_gossip_partitions",
		"Nodes on which the coordinator and the agents' gossip disagree for longer than the partition grace.", nil, nil)
	storeSizeDesc = prometheus.NewDesc("meshperf_store_size_bytes",
		"Size of the coordinator's bbolt file, in bytes.", nil, nil)
)

// scrapeCollector reads, at each scrape, what is not worth tracking on
// every event: the registry's agent counts and the store file's size.
type scrapeCollector struct {
	agents    Agents // nil: no agent gauges
	storePath string // "": no store gauge
	log       *slog.Logger
}

var _ prometheus.Collector = (*scrapeCollector)(nil)

// Describe sends every metric the collector may send.
func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- agentsConnectedDesc
	ch <- agentsKnownDesc
	ch <- gossipDeadDesc
	ch <- partitionsDesc
	ch <- storeSizeDesc
}

// Collect sends the agent counts and the store's size; a file that cannot
// be read is logged and its gauge left out of that scrape, so that the
// other metrics are still served.
func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.agents != nil {
		agents := c.agents.Agents()
		connected, dead, partitions := 0, 0, 0
		for _, a := range agents {
			if a.GetConnected() {
				connected++
			}
			switch a.GetGossipState() {
			case measurev1.GossipState_GOSSIP_STATE_DEAD, measurev1.GossipState_GOSSIP_STATE_LEFT:
				dead++
			}
			if a.GetPartition() != "" {
				partitions++
			}
		}
		ch <- prometheus.MustNewConstMetric(agentsConnectedDesc, prometheus.GaugeValue, float64(connected))
		ch <- prometheus.MustNewConstMetric(agentsKnownDesc, prometheus.GaugeValue, float64(len(agents)))
		ch <- prometheus.MustNewConstMetric(gossipDeadDesc, prometheus.GaugeValue, float64(dead))
		ch <- prometheus.MustNewConstMetric(partitionsDesc, prometheus.GaugeValue, float64(partitions))
	}
	if c.storePath != "" {
		fi, err := os.Stat(c.storePath)
		if err != nil {
			c.log.Warn("metrics: store size", "path", c.storePath, "err", err)
			return
		}
		ch <- prometheus.MustNewConstMetric(storeSizeDesc, prometheus.GaugeValue, float64(fi.Size()))
	}
}
