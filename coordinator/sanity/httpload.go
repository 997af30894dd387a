package sanity

import (
	"strconv"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// MaxRequestsPerSecond bounds an http_load's requests_per_second: 100
// million a second, far beyond what ab (one process, one core) does.
const MaxRequestsPerSecond = 1e8

// checkHTTPLoad checks an http_load's figures (ab's, counted by the
// runner): times finite, non-negative and at most t seconds, latency
// percentiles in order (p50 <= p90 <= p95 <= p99 <= max), rates within
// MaxRequestsPerSecond and MaxThroughputBps, and the counts consistent
// with each other and with the spec: requests and concurrency the spec's
// (normalized), completed <= requests, successful <= completed,
// successful + failed = requests, non-2xx, length failures and keep-alive
// requests <= completed, no rate or latency without a completed request, no success
// without a byte transferred, transferred bytes within what
// MaxThroughputBps carries in t, and the rates what ab prints (see
// rateFits): completed / duration and 8 * transferred / duration.
func checkHTTPLoad(m *measurev1.HttpLoadMetrics, t float64, spec *measurev1.TestSpec) error {
	lat := []figure{{"latency_p50_seconds", m.GetLatencyP50Seconds(), t, deadline}, {"latency_p90_seconds", m.GetLatencyP90Seconds(), t, deadline},
		{"latency_p95_seconds", m.GetLatencyP95Seconds(), t, deadline}, {"latency_p99_seconds", m.GetLatencyP99Seconds(), t, deadline},
		{"latency_max_seconds", m.GetLatencyMaxSeconds(), t, deadline}}
	all := append([]figure{
		{"requests_per_second", m.GetRequestsPerSecond(), MaxRequestsPerSecond, "the bound"},
		{"transfer_rate_bps", m.GetTransferRateBps(), MaxThroughputBps, "the bound"},
		{"duration_seconds", m.GetDurationSeconds(), t, deadline},
		{"latency_mean_seconds", m.GetLatencyMeanSeconds(), t, deadline},
	}, lat...)
	if err := checkAll(all...); err != nil {
		return err
	}
	if err := ordered(false, lat...); err != nil {
		return err
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	if n, err := testspec.Normalize(spec); err == nil {
		p := n.GetHttpLoad()
		if m.GetRequests() != uint64(p.GetRequests()) {
			return inconsistent("requests", u(m.GetRequests()), "is not the spec's requests %d", p.GetRequests())
		}
		if m.GetConcurrency() != p.GetConcurrency() {
			return inconsistent("concurrency", u(uint64(m.GetConcurrency())), "is not the spec's concurrency %d", p.GetConcurrency())
		}
	}
	req, done, ok := m.GetRequests(), m.GetCompletedRequests(), m.GetSuccessfulRequests()
	switch {
	case done > req:
		return inconsistent("completed_requests", u(done), "is over requests %d", req)
	case ok > done:
		return inconsistent("successful_requests", u(ok), "is over completed_requests %d", done)
	case ok+m.GetFailedRequests() != req:
		return inconsistent("failed_requests", u(m.GetFailedRequests()), "is not requests %d - successful_requests %d", req, ok)
	case done == 0 && m.GetRequestsPerSecond() != 0:
		return inconsistent("requests_per_second", num(m.GetRequestsPerSecond()), "with no completed request")
	case done == 0 && m.GetLatencyMeanSeconds() != 0:
		return inconsistent("latency_mean_seconds", num(m.GetLatencyMeanSeconds()), "with no completed request")
	case done == 0 && m.GetLatencyMaxSeconds() != 0: // percentiles are ordered up to it
		return inconsistent("latency_max_seconds", num(m.GetLatencyMaxSeconds()), "with no completed request")
	case ok > 0 && m.GetTransferredBytes() == 0:
		return inconsistent("transferred_bytes", "0", "with %d successful requests", ok)
	case !rateFits(m.GetRequestsPerSecond(), float64(done), m.GetDurationSeconds(), 0.01):
		return inconsistent("requests_per_second", num(m.GetRequestsPerSecond()), "is not completed_requests %d / duration_seconds %s", done, num(m.GetDurationSeconds()))
	case !rateFits(m.GetTransferRateBps(), 8*float64(m.GetTransferredBytes()), m.GetDurationSeconds(), 0.01*8192):
		return inconsistent("transfer_rate_bps", num(m.GetTransferRateBps()), "is not 8 * transferred_bytes %d / duration_seconds %s", m.GetTransferredBytes(), num(m.GetDurationSeconds()))
	}
	for _, c := range []struct {
		field string
		v     uint64
	}{{"non_2xx_responses", m.GetNon_2XxResponses()}, {"length_failures", m.GetLengthFailures()}, {"keep_alive_requests", m.GetKeepAliveRequests()}} {
		if c.v > done {
			return inconsistent(c.field, u(c.v), "is over completed_requests %d", done)
		}
	}
	if err := maxCount("transferred_bytes", m.GetTransferredBytes(), t); err != nil {
		return err
	}
	return nil
}

// rateFits reports whether rate is count / d as ab (Apache
// ab 2.3) prints it: d rounded to the millisecond, rate to round (its last printed
// digit, in rate's unit), within 1%. A d of 0.0005 s or less (ab printed
// 0.000) fits any rate.
func rateFits(rate, count, d, round float64) bool {
	if d <= 0.0005 {
		return true
	}
	return rate >= count/(d+0.0005)*0.99-round && rate <= count/(d-0.0005)*1.01+round
}
