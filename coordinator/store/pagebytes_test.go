package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestListResultsPageBytes: results of 1.2 MiB (as a coordinator before
// the bounds stored them) come a few per page, each page under
// MaxPageBytes (or one result), page after page until all are listed
// once; small results fill a page as page_size asks.
func TestListResultsPageBytes(t *testing.T) {
	tests := []struct {
		name      string
		message   int // bytes of each result's message
		n         int
		wantFirst int // results on the first page of page_size n
	}{
		{"1.2 MiB messages", 1258291, 6, 1},
		{"3 MiB messages", 3 << 20, 2, 1},
		{"4 KiB messages", 4096, 100, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTemp(t)
			ctx := context.Background()
			var rs []*measurev1.Result
			for i := range tt.n {
				r := result("run-1", fmt.Sprintf("t%03d", i), "node-1", "node-2", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING,
					t0.Add(time.Duration(i)*time.Second))
				r.Status, r.Message = measurev1.Status_STATUS_TOOL_ERROR, strings.Repeat("A", tt.message)
				rs = append(rs, r)
			}
			if err := s.AddResults(ctx, rs); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			token := ""
			for page := 0; ; page++ {
				got, next, err := s.ListResults(ctx, Filter{}, tt.n, token)
				if err != nil {
					t.Fatal(err)
				}
				size := 0
				for _, r := range got {
					size += len(r.GetMessage())
					if seen[r.GetTestId()] {
						t.Errorf("%s listed twice", r.GetTestId())
					}
					seen[r.GetTestId()] = true
				}
				if page == 0 && len(got) != tt.wantFirst {
					t.Errorf("first page: %d results, want %d", len(got), tt.wantFirst)
				}
				if len(got) > 1 && size > MaxPageBytes {
					t.Errorf("page %d: %d results of %d bytes, over %d", page, len(got), size, MaxPageBytes)
				}
				if next == "" {
					break
				}
				token = next
			}
			if len(seen) != tt.n {
				t.Errorf("%d results listed, want %d", len(seen), tt.n)
			}
		})
	}
}

// TestListRunsPageBytes: run headers whose specs name 40,000 pairs (about
// 1 MiB each) come a few per page, each page under MaxPageBytes, until
// every run is listed once, newest first.
func TestListRunsPageBytes(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	pairs := make([]*measurev1.NodePair, 40000)
	for i := range pairs {
		pairs[i] = &measurev1.NodePair{SrcNode: fmt.Sprintf("node-%05d", i), DstNode: "node-b"}
	}
	const n = 6
	for i := range n {
		run := &measurev1.Run{RunId: fmt.Sprintf("01RUN%04d", i), State: measurev1.RunState_RUN_STATE_SUCCEEDED,
			Spec: &measurev1.RunSpec{Pairs: pairs}}
		if err := s.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	token := ""
	for pages := 0; pages <= n; pages++ {
		runs, next, err := s.ListRuns(ctx, 1000, token)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, r := range runs {
			size += proto.Size(r)
			ids = append(ids, r.GetRunId())
		}
		if len(runs) > 1 && size > MaxPageBytes {
			t.Errorf("page %d: %d runs of %d bytes, over %d", pages, len(runs), size, MaxPageBytes)
		}
		if next == "" {
			break
		}
		token = next
	}
	if want := []string{"01RUN0005", "01RUN0004", "01RUN0003", "01RUN0002", "01RUN0001", "01RUN0000"}; !slices.Equal(ids, want) {
		t.Errorf("listed %v, want %v", ids, want)
	}
}

// TestListRollupsPageBytes: rollups of about 600 KiB (a fold that counted
// 100,000 failure statuses) come a few per page, each page under
// MaxPageBytes (or one rollup), until every hour is listed once.
func TestListRollupsPageBytes(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	const n = 12
	var rs []*measurev1.Result
	for h := range n {
		r := result("run-1", fmt.Sprintf("t%02d", h), "node-1", "node-2", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING,
			t0.Add(time.Duration(h)*time.Hour))
		rs = append(rs, r)
	}
	if err := s.AddResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	bigFold := func(rs []*measurev1.Result) []*measurev1.Rollup {
		out := hourFold(rs)
		for _, ru := range out {
			for i := range 100000 {
				ru.Failed = append(ru.Failed, &measurev1.StatusCount{Status: measurev1.Status_STATUS_TIMEOUT, Count: uint32(i + 1)})
			}
		}
		return out
	}
	if _, err := s.RollUp(ctx, t0.Add(n*time.Hour), 0, bigFold); err != nil {
		t.Fatal(err)
	}
	hours := map[time.Time]bool{}
	token := ""
	for page := 0; page <= n; page++ {
		got, next, err := s.ListRollups(ctx, Filter{}, MaxRollupsPageSize, token)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, ru := range got {
			size += proto.Size(ru)
			if h := ru.GetHourStart().AsTime(); hours[h] {
				t.Errorf("hour %v listed twice", h)
			} else {
				hours[h] = true
			}
		}
		if len(got) > 1 && size > MaxPageBytes {
			t.Errorf("page %d: %d rollups of %d bytes, over %d", page, len(got), size, MaxPageBytes)
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(hours) != n {
		t.Errorf("%d hours listed, want %d", len(hours), n)
	}
}
