package server

import (
	"context"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// ListProbeSeries returns one page of a series of the continuous mesh:
// the hourly rollups of the range, then its raw samples.
func (s *Server) ListProbeSeries(ctx context.Context, req *meshv1.ListProbeSeriesRequest) (*meshv1.ListProbeSeriesResponse, error) {
	for _, f := range []struct{ field, v string }{{"src_node", req.GetSrcNode()}, {"dst_node", req.GetDstNode()}} {
		if err := protocol.ValidateNodeName(f.v); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", f.field, err)
		}
	}
	if !testspec.IsProbePath(req.GetPath()) {
		return nil, status.Errorf(codes.InvalidArgument, "path %v: want a probe path (%s)", req.GetPath(), strings.Join(testspec.PathNamesOf(testspec.ProbePaths()), ", "))
	}
	if !testspec.IsProbeKind(req.GetKind()) {
		return nil, status.Errorf(codes.InvalidArgument, "kind %d: want a probe kind", req.GetKind())
	}
	since, until, err := timeRange(req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	key := series.Key{Src: req.GetSrcNode(), Dst: req.GetDstNode(), Path: req.GetPath(), Kind: req.GetKind(), Family: req.GetIpFamily()}
	page, next, err := s.cfg.Store.ListSeries(ctx, key, since, until, time.Now(), int(min(req.GetPageSize(), math.MaxInt32)), req.GetPageToken())
	if err != nil {
		return nil, grpcError(err)
	}
	out := &meshv1.ListProbeSeriesResponse{Samples: make([]*meshv1.ProbeSample, len(page.Samples)), NextPageToken: next}
	for i, x := range page.Samples {
		out.Samples[i] = &meshv1.ProbeSample{
			PeriodStart: timestamppb.New(x.Start), Period: durationpb.New(x.Period), Sent: x.Sent, Received: x.Received,
			RttMinSeconds: x.RTTMin.Seconds(), RttMedianSeconds: x.RTTMedian.Seconds(), RttP90Seconds: x.RTTP90.Seconds(), RttMaxSeconds: x.RTTMax.Seconds(),
			Status: x.Status, Message: x.Message,
		}
	}
	if len(page.Rollups) > 0 {
		out.Rollups = make([]*meshv1.ProbeRollup, len(page.Rollups))
	}
	for i, x := range page.Rollups {
		out.Rollups[i] = &meshv1.ProbeRollup{
			BucketStart: timestamppb.New(x.Start), Bucket: durationpb.New(series.RollupBucket), Periods: x.Periods, Sent: x.Sent, Received: x.Received,
			RttMinSeconds: x.RTTMin.Seconds(), RttMedianSeconds: x.RTTMedian.Seconds(), RttP90Seconds: x.RTTP90.Seconds(), RttMaxSeconds: x.RTTMax.Seconds(),
			FailedPeriods: x.Failed, LastFailedStatus: x.LastStatus,
		}
	}
	return out, nil
}
