package sanity

import (
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestCheckHTTPLoadRates is a hostile ab output (or a rogue agent) whose
// rates are within the absolute bounds but are not what its own counts
// and duration give: ab prints Requests per second as Complete requests /
// Time taken, Transfer rate as Total transferred / Time taken, (both
// rounded: Time taken to the millisecond, rates to 0.01).
func TestCheckHTTPLoadRates(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(m *measurev1.HttpLoadMetrics)
		wantIn string // "" passes
	}{
		{"as ab prints it", func(m *measurev1.HttpLoadMetrics) {}, ""},
		{"rounded duration", func(m *measurev1.HttpLoadMetrics) {
			m.DurationSeconds, m.RequestsPerSecond, m.TransferRateBps = 0.001, 2000/0.00149, 288000*8/0.00149
		}, ""},
		{"rps 7000 times its counts", func(m *measurev1.HttpLoadMetrics) { m.RequestsPerSecond = 1e7 }, "requests_per_second"},
		{"rps far under its counts", func(m *measurev1.HttpLoadMetrics) { m.RequestsPerSecond = 3 }, "requests_per_second"},
		{"latency with nothing completed", func(m *measurev1.HttpLoadMetrics) {
			m.CompletedRequests, m.SuccessfulRequests, m.FailedRequests, m.Non_2XxResponses, m.RequestsPerSecond = 0, 0, 2000, 0, 0
			m.TransferredBytes, m.TransferRateBps = 0, 0
		}, "latency_mean_seconds"},
		{"transfer rate 10 Gbit/s for 288 kB in 1.4 s", func(m *measurev1.HttpLoadMetrics) { m.TransferRateBps = 1e10 }, "transfer_rate_bps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := okHTTPLoad()
			tt.edit(r.GetHttpLoad())
			err := CheckResult(r, Timeout(r.GetSpec()))
			switch {
			case tt.wantIn == "" && err != nil:
				t.Fatalf("CheckResult: %v, want it to pass", err)
			case tt.wantIn != "" && (err == nil || ReasonOf(err) != Inconsistent || !strings.Contains(err.Error(), tt.wantIn)):
				t.Fatalf("CheckResult: %v (reason %s), want %s naming %q", err, ReasonOf(err), Inconsistent, tt.wantIn)
			}
		})
	}
}
