package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestListResultsOrigin: the origin filter keeps the results of runs of
// one origin, read from each run's stored header (its label for a run
// stored before origins); a result whose run is gone is kept only without
// the filter. Pages of one result give the
// same list, and a token of one origin is refused for another.
func TestListResultsOrigin(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	const (
		unspecified = measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED
		client      = measurev1.RunOrigin_RUN_ORIGIN_CLIENT
		monitor     = measurev1.RunOrigin_RUN_ORIGIN_MONITOR
	)
	runs := []struct {
		id     string
		origin measurev1.RunOrigin
		label  string
		stored bool
	}{
		{"run-client", client, "vxlan", true},
		{"run-monitor", monitor, "monitor-light", true},
		{"run-old-monitor", unspecified, "monitor-bandwidth", true},
		{"run-old-client", unspecified, "after MTU 9000", true},
		{"run-gone", unspecified, "", false},
	}
	var results []*measurev1.Result
	for i, r := range runs {
		if r.stored {
			run := &measurev1.Run{RunId: r.id, Origin: r.origin, Spec: &measurev1.RunSpec{Label: r.label}, State: measurev1.RunState_RUN_STATE_SUCCEEDED}
			if err := s.CreateRun(ctx, run); err != nil {
				t.Fatal(err)
			}
		}
		for j := range 2 {
			results = append(results, result(r.id, fmt.Sprintf("t%d", j), "node-1", "node-2", measurev1.Path_PATH_HOST_TO_HOST,
				measurev1.Test_TEST_PING, t0.Add(time.Duration(2*i+j)*time.Minute)))
		}
	}
	if err := s.AddResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		origin measurev1.RunOrigin
		want   []string
	}{
		{client, []string{"run-client/t0", "run-client/t1", "run-old-client/t0", "run-old-client/t1"}},
		{monitor, []string{"run-monitor/t0", "run-monitor/t1", "run-old-monitor/t0", "run-old-monitor/t1"}},
		{unspecified, []string{"run-client/t0", "run-client/t1", "run-monitor/t0", "run-monitor/t1", "run-old-monitor/t0",
			"run-old-monitor/t1", "run-old-client/t0", "run-old-client/t1", "run-gone/t0", "run-gone/t1"}},
	}
	for _, tt := range tests {
		t.Run(tt.origin.String(), func(t *testing.T) {
			for _, f := range []Filter{{SrcNode: "node-1", DstNode: "node-2", Origin: tt.origin}, {Origin: tt.origin}} {
				got := listPaged(ctx, t, s, f, 1, len(results))
				if fmt.Sprint(ids(got)) != fmt.Sprint(tt.want) {
					t.Errorf("filter %+v:\n got %v\nwant %v", f, ids(got), tt.want)
				}
			}
		})
	}
	_, token, err := s.ListResults(ctx, Filter{Origin: client}, 1, "")
	if err != nil || token == "" {
		t.Fatalf("first page of the client's results: token %q, err %v", token, err)
	}
	if _, _, err := s.ListResults(ctx, Filter{Origin: monitor}, 1, token); !errors.Is(err, ErrInvalid) {
		t.Errorf("a client-origin token with the monitor's filter: error %v, want ErrInvalid", err)
	}
}

// FuzzResultRunID: whatever the bytes, resultRunID agrees with
// proto.Unmarshal: the same run_id where the message decodes (the last
// occurrence of a repeated field wins in both), an error where the wire
// format is broken, and never a panic.
func FuzzResultRunID(f *testing.F) {
	for _, r := range []*measurev1.Result{
		{},
		result("01RUN", "t0", "node-1", "node-2", measurev1.Path_PATH_POD_TO_POD, measurev1.Test_TEST_PING, t0),
		{RunId: "x", TestId: "y", Message: "run_id inside a string", Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}},
	} {
		v, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
		f.Add(append(v, protowire.AppendString(protowire.AppendTag(nil, resultRunIDField, protowire.BytesType), "later")...))
	}
	f.Add([]byte{0x1a, 0x05, 'a'})                           // run_id longer than the bytes
	f.Add([]byte{0x18, 0x01})                                // field 3 as a varint
	f.Add(protowire.AppendTag(nil, 0, protowire.VarintType)) // field number 0
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := resultRunID(v)
		r := &measurev1.Result{}
		if uerr := proto.Unmarshal(v, r); uerr == nil {
			if err != nil || got != r.GetRunId() {
				t.Fatalf("resultRunID = %q, %v; proto.Unmarshal's run_id %q", got, err, r.GetRunId())
			}
		}
	})
}
