package web

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// fakeSource is an in-memory Source: runs newest first, results in
// (src, dst) order, one probe series' answer for every request.
type fakeSource struct {
	runs    []*measurev1.Run
	results map[string][]*measurev1.Result // by run ID
	agents  []*meshv1.Agent
	series  map[measurev1.Path]*meshv1.ListProbeSeriesResponse
}

func (f *fakeSource) GetRun(_ context.Context, req *meshv1.GetRunRequest) (*meshv1.GetRunResponse, error) {
	for _, r := range f.runs {
		if r.GetRunId() == req.GetRunId() {
			return &meshv1.GetRunResponse{Run: r}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "run %q not found", req.GetRunId())
}

func (f *fakeSource) ListResults(_ context.Context, req *meshv1.ListResultsRequest) (*meshv1.ListResultsResponse, error) {
	all := f.results[req.GetRunId()]
	from := 0
	if req.GetPageToken() != "" {
		var err error
		if from, err = strconv.Atoi(req.GetPageToken()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "page_token %q", req.GetPageToken())
		}
	}
	size := int(req.GetPageSize())
	to := min(len(all), from+size)
	next := ""
	if to < len(all) {
		next = strconv.Itoa(to)
	}
	return &meshv1.ListResultsResponse{Results: all[from:to], NextPageToken: next}, nil
}

func (f *fakeSource) ListAgents(context.Context, *meshv1.ListAgentsRequest) (*meshv1.ListAgentsResponse, error) {
	return &meshv1.ListAgentsResponse{Agents: f.agents}, nil
}

func (f *fakeSource) ListRuns(context.Context, *meshv1.ListRunsRequest) (*meshv1.ListRunsResponse, error) {
	return &meshv1.ListRunsResponse{Runs: f.runs}, nil
}

func (f *fakeSource) ListProbeSeries(_ context.Context, req *meshv1.ListProbeSeriesRequest) (*meshv1.ListProbeSeriesResponse, error) {
	if s := f.series[req.GetPath()]; s != nil {
		return s, nil
	}
	return &meshv1.ListProbeSeriesResponse{}, nil
}

// pingResult is an OK ping result of src -> dst on path with an RTT of
// rtt seconds and no loss.
func pingResult(runID, src, dst string, path measurev1.Path, rtt float64) *measurev1.Result {
	return &measurev1.Result{RunId: runID, SrcNode: src, DstNode: dst, Path: path, Status: measurev1.Status_STATUS_OK,
		Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
		Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 10, PacketsReceived: 10,
			RttMinSeconds: rtt, RttAvgSeconds: rtt, RttMaxSeconds: rtt, RttMedianSeconds: &rtt}}}
}

// meshSource is a fakeSource with one ended continuous ping run over
// nodes on host-host and pod-pod: pod-pod RTT twice host-host's 100 µs
// (plus a little), except that pairs with bad as source or destination
// fail on pod-pod.
func meshSource(nodes []string, bad string) *fakeSource {
	const runID = "run-1"
	end := timestamppb.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	run := &measurev1.Run{RunId: runID, State: measurev1.RunState_RUN_STATE_SUCCEEDED, EndTime: end, CreateTime: end,
		Spec: &measurev1.RunSpec{Label: "monitor-light", Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
			Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD}}}
	var results []*measurev1.Result
	for _, src := range nodes {
		for _, dst := range nodes {
			if src == dst {
				continue
			}
			results = append(results, pairResults(runID, src, dst, bad)...)
		}
	}
	agents := make([]*meshv1.Agent, 0, len(nodes))
	for _, n := range nodes {
		agents = append(agents, &meshv1.Agent{NodeName: n, Connected: true, State: meshv1.NodeState_NODE_STATE_READY, AgentVersion: "v1"})
	}
	return &fakeSource{runs: []*measurev1.Run{run}, results: map[string][]*measurev1.Result{runID: results}, agents: agents}
}

// pairResults are a pair's ping results in run runID: host-host at 100 µs,
// pod-pod at 150 µs, or timed out when src or dst is bad.
func pairResults(runID, src, dst, bad string) []*measurev1.Result {
	r := pingResult(runID, src, dst, measurev1.Path_PATH_POD_TO_POD, 150e-6)
	if src == bad || dst == bad {
		r = &measurev1.Result{RunId: runID, SrcNode: src, DstNode: dst, Path: measurev1.Path_PATH_POD_TO_POD,
			Status: measurev1.Status_STATUS_TIMEOUT, Message: "no reply", Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}}
	}
	return []*measurev1.Result{pingResult(runID, src, dst, measurev1.Path_PATH_HOST_TO_HOST, 100e-6), r}
}
