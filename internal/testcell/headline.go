package testcell

import (
	"math"
	"strings"

	"github.com/meshperf/meshperf/internal/testspec"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// PingLoss is the share of echo requests that got no reply over the OK
// ping results of rs (other results are skipped): the sum of their
// packets_transmitted minus packets_received over the sum of
// packets_transmitted (the runner counts only requests that left the
// host), or, for results without counts, the mean of their loss_ratio. It
// is in 0..1; 0 when there is nothing to count. Figures that are not
// finite or out of range are left out.
func PingLoss(rs []*measurev1.Result) float64 {
	var sent, lost uint64
	var ratios float64
	var n int
	for _, r := range rs {
		p := r.GetPing()
		if r.GetStatus() != measurev1.Status_STATUS_OK || p == nil {
			continue
		}
		if tx := uint64(p.GetPacketsTransmitted()); tx > 0 {
			sent += tx
			lost += tx - min(tx, uint64(p.GetPacketsReceived()))
			continue
		}
		if x := p.GetLossRatio(); x >= 0 && x <= 1 { // false for NaN
			ratios += x
			n++
		}
	}
	switch {
	case sent > 0 && n > 0:
		return (float64(lost) + ratios) / (float64(sent) + float64(n))
	case sent > 0:
		return float64(lost) / float64(sent)
	case n > 0:
		return ratios / float64(n)
	}
	return 0
}

// Headline is a result's main figure in base units: median RTT (s) for
// ping (PingRTTSeconds), one-way latency (s) or throughput (bit/s) for
// qperf, receiver throughput (bit/s) for iperf3, total time (s) for HTTP,
// the median time per request under load (s, ab's 50% figure) for
// http_load (its requests per second and failures: report.LoadSummary); 0 for a
// failure.
func Headline(r *measurev1.Result) float64 {
	switch m := r.GetMetrics().(type) {
	case *measurev1.Result_Ping:
		return PingRTTSeconds(m.Ping)
	case *measurev1.Result_Qperf:
		if IsLatency(r.GetSpec().GetTest()) {
			return m.Qperf.GetLatencySeconds()
		}
		return m.Qperf.GetThroughputBps()
	case *measurev1.Result_Iperf3:
		return m.Iperf3.GetThroughputBps()
	case *measurev1.Result_Http:
		return m.Http.GetTotalSeconds()
	case *measurev1.Result_HttpLoad:
		return m.HttpLoad.GetLatencyP50Seconds()
	}
	return 0
}

// Measured is r's headline figure (Headline) and true if r is a
// measurement: STATUS_OK, with metrics, and a headline that is finite and
// not negative. A result stored before the coordinator checked figures
// may be OK with NaN, an infinity or a negative figure: it is no
// measurement, and shows as invalid.
func Measured(r *measurev1.Result) (float64, bool) {
	if r.GetStatus() != measurev1.Status_STATUS_OK || r.GetMetrics() == nil {
		return 0, false
	}
	v := Headline(r)
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false
	}
	return v, true
}

// StatusOf is r's status, or STATUS_INVALID for an OK result that is no
// measurement (Measured).
func StatusOf(r *measurev1.Result) measurev1.Status {
	if r.GetStatus() == measurev1.Status_STATUS_OK {
		if _, ok := Measured(r); !ok {
			return measurev1.Status_STATUS_INVALID
		}
	}
	return r.GetStatus()
}

// PingRTTSeconds is ping's figure for a pair, in seconds: the median RTT
// of the run's replies (rtt_median_seconds), or the average RTT
// (rtt_avg_seconds) for a result of an agent older than the median, which
// stored none.
func PingRTTSeconds(m *measurev1.PingMetrics) float64 {
	if m.RttMedianSeconds != nil {
		return m.GetRttMedianSeconds()
	}
	return m.GetRttAvgSeconds()
}

// IsLatency reports whether a qperf test reports latency (not throughput).
func IsLatency(t measurev1.Test) bool {
	return t == measurev1.Test_TEST_QPERF_TCP_LAT || t == measurev1.Test_TEST_QPERF_UDP_LAT
}

// headlines says, for each test, what its Headline figure is: its column
// title in tables, what the figure means, and whether it is a throughput
// (bit/s, higher is better) or a time (s, lower is better). The one table
// of it: Title, Meaning, Unit and HigherIsBetter read it.
var headlines = map[measurev1.Test]struct {
	title, meaning string
	throughput     bool
}{
	measurev1.Test_TEST_PING:          {"PING RTT", "median RTT", false},
	measurev1.Test_TEST_QPERF_TCP_LAT: {"QPERF TCP LAT (1-way)", "one-way latency", false},
	measurev1.Test_TEST_QPERF_UDP_LAT: {"QPERF UDP LAT (1-way)", "one-way latency", false},
	measurev1.Test_TEST_QPERF_TCP_BW:  {"QPERF TCP BW", "throughput", true},
	measurev1.Test_TEST_QPERF_UDP_BW:  {"QPERF UDP BW", "throughput", true},
	measurev1.Test_TEST_IPERF3_TCP:    {"IPERF3 TCP", "throughput", true},
	measurev1.Test_TEST_IPERF3_UDP:    {"IPERF3 UDP", "throughput", true},
	measurev1.Test_TEST_HTTP:          {"HTTP TOTAL", "total time", false},
	measurev1.Test_TEST_HTTP_LOAD:     {"HTTP LOAD p50", "median time per request under load", false},
}

// Title is test's column title in tables, with what its headline figure
// is ("PING RTT", "IPERF3 TCP"); the test's name in capitals for a test
// without one.
func Title(test measurev1.Test) string {
	if h, ok := headlines[test]; ok {
		return h.title
	}
	return strings.ToUpper(testspec.Name(test))
}

// Meaning is what test's headline figure is, in words ("median RTT",
// "throughput"); "headline figure" for a test without a row.
func Meaning(test measurev1.Test) string {
	if h, ok := headlines[test]; ok {
		return h.meaning
	}
	return "headline figure"
}

// Unit is the base unit of a test's headline figure (Headline): "bit/s"
// for throughput, "s" for latency and time.
func Unit(test measurev1.Test) string {
	if HigherIsBetter(test) {
		return "bit/s"
	}
	return "s"
}

// HigherIsBetter reports whether a larger headline figure of test is an
// improvement (throughput) rather than a degradation (latency, time).
func HigherIsBetter(test measurev1.Test) bool { return headlines[test].throughput }
