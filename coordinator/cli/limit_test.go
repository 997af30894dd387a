package cli

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// pageServer answers ListResults with page_size results (1000 for 0) and
// always a next page, and records the page sizes asked for.
type pageServer struct {
	meshv1.UnimplementedMeshServiceServer
	mu    sync.Mutex
	sizes []uint32
}

func (s *pageServer) ListResults(_ context.Context, req *meshv1.ListResultsRequest) (*meshv1.ListResultsResponse, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, req.GetPageSize())
	s.mu.Unlock()
	n := req.GetPageSize()
	if n == 0 {
		n = 1000
	}
	resp := &meshv1.ListResultsResponse{NextPageToken: "more"}
	for i := range n {
		resp.Results = append(resp.Results, &measurev1.Result{RunId: "r1", TestId: fmt.Sprintf("t%05d", i), Status: measurev1.Status_STATUS_OK})
	}
	return resp, nil
}

// TestResultsLimitAsksForN: `results --limit N` asks the coordinator for
// N results (page_size), never more, so that it sends no more than are
// printed.
func TestResultsLimitAsksForN(t *testing.T) {
	tests := []struct {
		limit string
		want  []uint32
	}{
		{"5", []uint32{5}},
		{"1", []uint32{1}},
		{"12000", []uint32{10000, 2000}},
	}
	for _, tt := range tests {
		t.Run(tt.limit, func(t *testing.T) {
			srv := &pageServer{}
			sock := serveMesh(t, srv)
			var out, errOut bytes.Buffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs([]string{"results", "--limit", tt.limit, "-o", "csv", "--coordinator", "unix://" + sock})
			if err := cmd.Execute(); err != nil {
				t.Fatalf("results: %v\n%s", err, errOut.String())
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if !slices.Equal(srv.sizes, tt.want) {
				t.Errorf("page sizes asked %v, want %v", srv.sizes, tt.want)
			}
		})
	}
}
