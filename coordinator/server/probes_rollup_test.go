package server_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// ListProbeSeries gives the hours that retention rolled up as rollups,
// before the raw samples of the same range.
func TestListProbeSeriesRollups(t *testing.T) {
	st, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	block := time.Now().Add(-30 * time.Hour).Truncate(store.SeriesBlock)
	const period = 10 * time.Second
	var rs []series.Report
	for i := 0; i < 3*360; i++ { // three hours: two rolled up, one raw
		m := series.Summary{Dst: "node-b", Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP,
			Sent: 10, Received: 10, RTTMin: time.Millisecond, RTTMedian: 2 * time.Millisecond, RTTP90: 3 * time.Millisecond,
			RTTMax: 4 * time.Millisecond, Status: measurev1.Status_STATUS_OK}
		if i == 5 {
			m.Received, m.Status, m.Message = 8, measurev1.Status_STATUS_TIMEOUT, "timed out"
		}
		rs = append(rs, series.Report{Src: "node-a", Seq: uint64(i + 1), Start: block.Add(time.Duration(i) * period), Period: period,
			Summaries: []series.Summary{m}})
	}
	if _, err := st.AppendReports(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RollUpSeries(ctx, block.Add(store.SeriesBlock), 0); err != nil {
		t.Fatal(err)
	}
	req := &meshv1.ListProbeSeriesRequest{SrcNode: "node-a", DstNode: "node-b", Path: measurev1.Path_PATH_HOST_TO_HOST,
		Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, StartTime: timestamppb.New(block.Add(-time.Hour)), EndTime: timestamppb.New(block.Add(4 * time.Hour))}
	for _, tt := range []struct {
		name      string
		size      uint32
		wantPages []string // rollups/samples per page
	}{
		{"one page", 0, []string{"2/360"}},
		{"rollups then samples", 200, []string{"2/198", "0/162"}},
		{"a page of rollups", 2, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req.PageSize, req.PageToken = tt.size, ""
			var pages []string
			var first *meshv1.ListProbeSeriesResponse
			for {
				resp, err := c.ListProbeSeries(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = resp
				}
				pages = append(pages, fmt.Sprintf("%d/%d", len(resp.GetRollups()), len(resp.GetSamples())))
				if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" || tt.wantPages == nil {
					break
				}
			}
			if tt.wantPages != nil && fmt.Sprint(pages) != fmt.Sprint(tt.wantPages) {
				t.Errorf("pages %v, want %v", pages, tt.wantPages)
			}
			r := first.GetRollups()[0]
			if !r.GetBucketStart().AsTime().Equal(block) || r.GetBucket().AsDuration() != time.Hour || r.GetPeriods() != 360 ||
				r.GetSent() != 3600 || r.GetReceived() != 3598 || r.GetRttMinSeconds() != 1e-3 || r.GetRttMedianSeconds() != 2e-3 ||
				r.GetRttP90Seconds() != 3e-3 || r.GetRttMaxSeconds() != 4e-3 || r.GetFailedPeriods() != 1 ||
				r.GetLastFailedStatus() != measurev1.Status_STATUS_TIMEOUT {
				t.Errorf("first rollup %v", r)
			}
		})
	}
}
