package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestRequestFieldsRefused: a run ID, node name, enum or timestamp that
// cannot be is InvalidArgument naming the field, quoting a bounded part
// of the value; none reaches the store, where a NUL in a key prefix would
// reach past its field (another pair's rollups, a raw key in an error).
func TestRequestFieldsRefused(t *testing.T) {
	_, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	huge := strings.Repeat("x", 1<<20)
	badTime := &timestamppb.Timestamp{Seconds: 1, Nanos: -5}
	calls := []struct {
		name, field string
		call        func() error
	}{
		{"GetRun of a huge run_id", "run_id", func() error { _, err := c.GetRun(ctx, &meshv1.GetRunRequest{RunId: huge}); return err }},
		{"CancelRun of a run_id with a NUL", "run_id", func() error {
			_, err := c.CancelRun(ctx, &meshv1.CancelRunRequest{RunId: "run-1\x00node-1"})
			return err
		}},
		{"WatchRun of a run_id with a newline", "run_id", func() error {
			st, err := c.WatchRun(ctx, &meshv1.WatchRunRequest{RunId: "run-1\nforged log line"})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}},
		{"ListResults of a run_id with a NUL", "run_id", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{RunId: "run-1\x00node-1"})
			return err
		}},
		{"ListResults of a huge src_node", "src_node", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: huge})
			return err
		}},
		{"ListResults of an unknown path", "path", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{Path: 999})
			return err
		}},
		{"ListResults of an invalid start_time", "start_time", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{StartTime: badTime})
			return err
		}},
		{"ListRollups of a src_node with a NUL", "src_node", func() error {
			_, err := c.ListRollups(ctx, &meshv1.ListRollupsRequest{SrcNode: "node-1\x00node-2"})
			return err
		}},
		{"ListRollups of an unknown test", "test", func() error {
			_, err := c.ListRollups(ctx, &meshv1.ListRollupsRequest{Test: -1})
			return err
		}},
		{"ListRollups of an invalid end_time", "end_time", func() error {
			_, err := c.ListRollups(ctx, &meshv1.ListRollupsRequest{EndTime: &timestamppb.Timestamp{Nanos: 2e9}})
			return err
		}},
		{"ListProbeSeries of an invalid start_time", "start_time", func() error {
			_, err := c.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: "a", DstNode: "b",
				Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, StartTime: badTime})
			return err
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			s, _ := status.FromError(err)
			if s.Code() != codes.InvalidArgument || !strings.HasPrefix(s.Message(), tc.field) || len(s.Message()) > 300 {
				msg := s.Message()
				t.Errorf("%v: %.300q (%d bytes); want InvalidArgument naming %s in at most 300 bytes", s.Code(), msg, len(msg), tc.field)
			}
		})
	}
}
