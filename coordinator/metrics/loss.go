package metrics

import (
	"math"

	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// lossRatio is r's packet loss, a ratio 0..1, and true if r measures loss:
// an OK ping (lost echoes) or iperf3 UDP result (lost datagrams) with a
// finite ratio in 0..1. TCP tests and HTTP measure none: a lost packet
// there is retransmitted and shows as latency.
func lossRatio(r *measurev1.Result) (float64, bool) {
	if r.GetStatus() != measurev1.Status_STATUS_OK {
		return 0, false
	}
	var v float64
	switch m := r.GetMetrics().(type) {
	case *measurev1.Result_Ping:
		v = m.Ping.GetLossRatio()
	case *measurev1.Result_Iperf3:
		if r.GetSpec().GetTest() != measurev1.Test_TEST_IPERF3_UDP {
			return 0, false
		}
		v = m.Iperf3.GetLossRatio()
	default:
		return 0, false
	}
	if math.IsNaN(v) || v < 0 || v > 1 {
		return 0, false
	}
	return v, true
}

// recordLosses sets, for each pair of losses (the losses of one batch),
// the pair's loss (the median of the batch's) and the per-node medians it
// changes, as Recorded does for the headline figures. Caller holds m.mu.
func (m *Metrics) recordLosses(losses map[pairKey][]float64) {
	for k, vs := range losses {
		v := stats.FiniteMedian(vs)
		if m.cfg.PerPair {
			m.pairLoss.WithLabelValues(k.src, k.dst, testspec.Name(k.test), testspec.PathName(k.path)).Set(v)
		}
		for _, e := range testspec.DestinationOf(k.path, k.dst).Ends(k.src) {
			setMedian(m.lastLoss, m.nodeLoss, nodeKey{node: e.Node, role: e.Role, test: k.test, path: k.path}, e.Peer, v)
		}
	}
}
