package store

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// hourFold folds results per hour: samples, and min, max, mean and median
// of their index (a stand-in for the headline figure).
func hourFold(rs []*measurev1.Result) []*measurev1.Rollup {
	by := map[time.Time][]float64{}
	var hours []time.Time
	var first *measurev1.Result
	for _, r := range rs {
		h := r.GetStartTime().AsTime().Truncate(time.Hour)
		if by[h] == nil {
			hours = append(hours, h)
		}
		by[h] = append(by[h], float64(r.GetIndex()))
		first = r
	}
	var out []*measurev1.Rollup
	for _, h := range hours {
		v := by[h]
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		out = append(out, &measurev1.Rollup{SrcNode: first.GetSrcNode(), DstNode: first.GetDstNode(), Path: first.GetPath(), Spec: first.GetSpec(),
			HourStart: timestamppb.New(h), Samples: uint32(len(v)), MinValue: v[0], MaxValue: v[len(v)-1], MeanValue: sum / float64(len(v)),
			MedianValue: v[len(v)/2], Failed: []*measurev1.StatusCount{{Status: measurev1.Status_STATUS_TIMEOUT, Count: 1}}})
	}
	return out
}

// TestRollUpChunksAndMerges: a backlog of one pair is rolled in whole
// hours of about maxResults per transaction (an hour is never split), and
// a result that comes for an hour already rolled is merged into that
// hour's rollup (counts add, extremes kept, the mean weighted) instead of
// replacing it.
func TestRollUpChunksAndMerges(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	var rs []*measurev1.Result
	for h := range 3 {
		for i := range 5 {
			r := result("run-1", fmt.Sprintf("t%d%d", h, i), "node-1", "node-2", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING,
				t0.Add(time.Duration(h)*time.Hour+time.Duration(i)*time.Minute))
			r.Index = uint32(10*h + i)
			rs = append(rs, r)
		}
	}
	if err := s.AddResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	cutoff := t0.Add(4 * time.Hour)
	var passes []int
	for range 5 {
		n, err := s.RollUp(ctx, cutoff, 6, hourFold)
		if err != nil {
			t.Fatal(err)
		}
		if passes = append(passes, n); n == 0 {
			break
		}
	}
	if fmt.Sprint(passes) != "[10 5 0]" {
		t.Errorf("RollUp passes rolled %v results, want [10 5 0]: whole hours, about 6 a pass", passes)
	}
	late := result("run-2", "late", "node-1", "node-2", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING, t0.Add(30*time.Minute))
	late.Index = 100
	if err := s.AddResults(ctx, []*measurev1.Result{late}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RollUp(ctx, cutoff, 0, hourFold); err != nil || n != 1 {
		t.Fatalf("RollUp of the late result: %d, %v; want 1", n, err)
	}
	got, _, err := s.ListRollups(ctx, Filter{SrcNode: "node-1", DstNode: "node-2"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d rollups, want one per hour (3)", len(got))
	}
	h0 := got[0]
	if h0.GetSamples() != 6 || h0.GetMinValue() != 0 || h0.GetMaxValue() != 100 || h0.GetMeanValue() != (0+1+2+3+4+100)/6.0 ||
		h0.GetMedianValue() != 2 || len(h0.GetFailed()) != 1 || h0.GetFailed()[0].GetCount() != 2 {
		t.Errorf("hour 0 after the late result: %v; want 6 samples, min 0, max 100, mean 110/6, median 2 (the larger part's), 2 timeouts", h0)
	}
}
