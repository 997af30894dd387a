package cluster

import (
	"context"
	"fmt"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// RunResults returns every stored result of a run, page by page (10,000
// results a page, ListResults' largest), in ListResults' order. The error
// names the run.
func RunResults(ctx context.Context, client meshv1.MeshServiceClient, runID string) ([]*measurev1.Result, error) {
	req := &meshv1.ListResultsRequest{RunId: runID, PageSize: 10000}
	var out []*measurev1.Result
	for {
		resp, err := client.ListResults(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("results of run %s: %w", runID, err)
		}
		out = append(out, resp.GetResults()...)
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
