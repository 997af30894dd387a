package server_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestListProbeSeriesFamily: ip_family picks the series (unspecified is
// IPv4's), and an unknown family is refused.
func TestListProbeSeriesFamily(t *testing.T) {
	st, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	r := series.Report{Src: "node-a", Seq: 1, Start: start, Period: 10 * time.Second}
	for _, f := range []struct {
		fam measurev1.IPFamily
		rtt time.Duration
	}{{measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, time.Millisecond}, {measurev1.IPFamily_IP_FAMILY_IPV6, 3 * time.Millisecond}} {
		r.Summaries = append(r.Summaries, series.Summary{Dst: "node-b", Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP,
			Family: f.fam, Sent: 1, Received: 1, RTTMin: f.rtt, RTTMedian: f.rtt, RTTP90: f.rtt, RTTMax: f.rtt, Status: measurev1.Status_STATUS_OK})
	}
	if stored, err := st.AppendReports(ctx, []series.Report{r}); err != nil || !stored[0] {
		t.Fatalf("AppendReports: %v, %v", stored, err)
	}
	tests := []struct {
		fam  measurev1.IPFamily
		want float64 // median RTT, seconds; 0: refused
	}{
		{measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, 0.001},
		{measurev1.IPFamily_IP_FAMILY_IPV4, 0.001},
		{measurev1.IPFamily_IP_FAMILY_IPV6, 0.003},
		{measurev1.IPFamily(9), 0},
	}
	for _, tt := range tests {
		resp, err := c.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: "node-a", DstNode: "node-b",
			Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, IpFamily: tt.fam})
		if tt.want == 0 {
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("family %v: %v, want InvalidArgument", tt.fam, err)
			}
			continue
		}
		if err != nil || len(resp.GetSamples()) != 1 || resp.GetSamples()[0].GetRttMedianSeconds() != tt.want {
			t.Errorf("family %v: %v, %v; want one sample of median %v s", tt.fam, resp.GetSamples(), err, tt.want)
		}
	}
}
