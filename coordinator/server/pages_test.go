package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/server"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// storeOnly is a real bbolt store behind the real MeshService on a
// loopback TCP port, with only the store wired in: what the listings use.
func storeOnly(t *testing.T) (*store.Store, meshv1.MeshServiceClient) {
	t.Helper()
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	g, conn := serveLoopback(t, server.New(server.Config{Store: st}))
	t.Cleanup(func() {
		_ = conn.Close()
		g.Stop()
		_ = st.Close()
	})
	return st, meshv1.NewMeshServiceClient(conn)
}

// pageFn fetches one page: the items' names and the next page's token.
type pageFn func(ctx context.Context, size uint32, token string) ([]string, string, error)

// walk pages through a listing with pages of size, calling between(i)
// after page i (if set), and returns the pages.
func walk(t *testing.T, ctx context.Context, list pageFn, size uint32, between func(page int)) [][]string {
	t.Helper()
	var pages [][]string
	token := ""
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("the listing does not end")
		}
		items, next, err := list(ctx, size, token)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		pages = append(pages, items)
		if next == "" {
			return pages
		}
		if len(items) == 0 {
			t.Fatalf("page %d is empty but has a next page token", i)
		}
		if between != nil {
			between(i)
		}
		token = next
	}
}

func runIDs(n int, from int) []string {
	var ids []string
	for i := from; i < from+n; i++ {
		ids = append(ids, fmt.Sprintf("01RUN%04d", i))
	}
	return ids
}

func createRuns(t *testing.T, ctx context.Context, st *store.Store, ids []string) {
	t.Helper()
	for _, id := range ids {
		if err := st.CreateRun(ctx, &measurev1.Run{RunId: id}); err != nil {
			t.Fatal(err)
		}
	}
}

func reversed(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }

func TestListRunsPages(t *testing.T) {
	listRuns := func(c meshv1.MeshServiceClient) pageFn {
		return func(ctx context.Context, size uint32, token string) ([]string, string, error) {
			resp, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: size, PageToken: token})
			var ids []string
			for _, r := range resp.GetRuns() {
				ids = append(ids, r.GetRunId())
			}
			return ids, resp.GetNextPageToken(), err
		}
	}
	tests := []struct {
		name    string
		runs    int
		size    uint32
		between func(ctx context.Context, st *store.Store, page int)
		want    [][]string // pages of run IDs, newest first
	}{
		{"empty store", 0, 3, nil, [][]string{nil}},
		{"one page, default size", 5, 0, nil, [][]string{reversed(runIDs(5, 0))}},
		{"first, middle and last page", 7, 3, nil, [][]string{
			{"01RUN0006", "01RUN0005", "01RUN0004"}, {"01RUN0003", "01RUN0002", "01RUN0001"}, {"01RUN0000"}}},
		{"pages that end exactly", 4, 2, nil, [][]string{{"01RUN0003", "01RUN0002"}, {"01RUN0001", "01RUN0000"}}},
		{"page size 1", 2, 1, nil, [][]string{{"01RUN0001"}, {"01RUN0000"}}},
		{"new runs between pages do not shift a page", 6, 2, func(ctx context.Context, st *store.Store, page int) {
			createRuns(t, ctx, st, runIDs(3, 100+10*page))
		}, [][]string{{"01RUN0005", "01RUN0004"}, {"01RUN0003", "01RUN0002"}, {"01RUN0001", "01RUN0000"}}},
		{"the token's run deleted between pages", 5, 2, func(ctx context.Context, st *store.Store, page int) {
			if page > 0 {
				return
			}
			old := &measurev1.Run{RunId: "01RUN0003", EndTime: timestamppb.New(time.Unix(1, 0))}
			if err := st.PutRun(ctx, old); err != nil {
				t.Fatal(err)
			}
			if n, err := st.DeleteRunsBefore(ctx, time.Unix(2, 0)); err != nil || n != 1 {
				t.Fatalf("DeleteRunsBefore = %d, %v; want 1", n, err)
			}
		}, [][]string{{"01RUN0004", "01RUN0003"}, {"01RUN0002", "01RUN0001"}, {"01RUN0000"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, c := storeOnly(t)
			ctx := testnet.Ctx(t, 10*time.Second)
			createRuns(t, ctx, st, runIDs(tt.runs, 0))
			var between func(int)
			if tt.between != nil {
				between = func(page int) { tt.between(ctx, st, page) }
			}
			if got := walk(t, ctx, listRuns(c), tt.size, between); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pages %v\nwant  %v", got, tt.want)
			}
		})
	}
}

// The deprecated limit still sizes a page, and a page_size wins over it.
func TestListRunsLimit(t *testing.T) {
	st, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	createRuns(t, ctx, st, runIDs(30, 0))
	for _, tt := range []struct {
		req  *meshv1.ListRunsRequest
		want int
	}{
		{&meshv1.ListRunsRequest{}, store.DefaultRunsPageSize},
		{&meshv1.ListRunsRequest{Limit: 3}, 3},                 //nolint:staticcheck // SA1019: the deprecated limit is what this case checks
		{&meshv1.ListRunsRequest{Limit: 3, PageSize: 5}, 5},    //nolint:staticcheck // SA1019: the deprecated limit is what this case checks
		{&meshv1.ListRunsRequest{Limit: 2000, PageSize: 4}, 4}, //nolint:staticcheck // SA1019: the deprecated limit is what this case checks
	} {
		resp, err := c.ListRuns(ctx, tt.req)
		if err != nil || len(resp.GetRuns()) != tt.want || resp.GetNextPageToken() == "" {
			t.Errorf("ListRuns(%v) = %d runs, token %q, %v; want %d and a token", tt.req, len(resp.GetRuns()), resp.GetNextPageToken(), err, tt.want)
		}
	}
}

// rollUp rolls the results up, one rollup per result (its hour the
// result's start).
func rollUp(t *testing.T, ctx context.Context, st *store.Store, results []*measurev1.Result) {
	t.Helper()
	if err := st.AddResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	_, err := st.RollUp(ctx, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0, func(rs []*measurev1.Result) []*measurev1.Rollup {
		var out []*measurev1.Rollup
		for _, r := range rs {
			out = append(out, &measurev1.Rollup{SrcNode: r.GetSrcNode(), DstNode: r.GetDstNode(), Path: r.GetPath(),
				Spec: r.GetSpec(), HourStart: r.GetStartTime(), Samples: 1})
		}
		return out
	})
	if err != nil {
		t.Fatal(err)
	}
}

var hour0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// hourly is a result of src -> dst at hour0 plus h hours.
func hourly(src, dst string, h int) *measurev1.Result {
	return &measurev1.Result{TestId: fmt.Sprintf("%s-%s-%d", src, dst, h), RunId: "r", SrcNode: src, DstNode: dst,
		Path: measurev1.Path_PATH_HOST_TO_HOST, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
		Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.New(hour0.Add(time.Duration(h) * time.Hour))}
}

func hourlies(src, dst string, hours ...int) []*measurev1.Result {
	var out []*measurev1.Result
	for _, h := range hours {
		out = append(out, hourly(src, dst, h))
	}
	return out
}

func TestListRollupsPages(t *testing.T) {
	listRollups := func(c meshv1.MeshServiceClient, req *meshv1.ListRollupsRequest) pageFn {
		return func(ctx context.Context, size uint32, token string) ([]string, string, error) {
			req.PageSize, req.PageToken = size, token
			resp, err := c.ListRollups(ctx, req)
			var names []string
			for _, ru := range resp.GetRollups() {
				names = append(names, fmt.Sprintf("%s>%s@%d", ru.GetSrcNode(), ru.GetDstNode(), int(ru.GetHourStart().AsTime().Sub(hour0).Hours())))
			}
			return names, resp.GetNextPageToken(), err
		}
	}
	seed := slices.Concat(hourlies("a", "b", 0, 1, 2), hourlies("a", "c", 0, 1), hourlies("b", "a", 5))
	tests := []struct {
		name    string
		req     *meshv1.ListRollupsRequest
		size    uint32
		between func(page int) []*measurev1.Result // rolled up after page
		want    [][]string
	}{
		{"every pair", &meshv1.ListRollupsRequest{}, 2, nil, [][]string{{"a>b@0", "a>b@1"}, {"a>b@2", "a>c@0"}, {"a>c@1", "b>a@5"}}},
		{"one pair, one page", &meshv1.ListRollupsRequest{SrcNode: "a", DstNode: "b"}, 0, nil, [][]string{{"a>b@0", "a>b@1", "a>b@2"}}},
		{"one pair and hours", &meshv1.ListRollupsRequest{SrcNode: "a", DstNode: "b",
			StartTime: timestamppb.New(hour0.Add(time.Hour)), EndTime: timestamppb.New(hour0.Add(3 * time.Hour))}, 1, nil,
			[][]string{{"a>b@1"}, {"a>b@2"}}},
		{"one source", &meshv1.ListRollupsRequest{SrcNode: "a"}, 3, nil, [][]string{{"a>b@0", "a>b@1", "a>b@2"}, {"a>c@0", "a>c@1"}}},
		{"nothing matches", &meshv1.ListRollupsRequest{SrcNode: "z"}, 3, nil, [][]string{nil}},
		{"rollups added between pages: before the cursor left out, after it returned", &meshv1.ListRollupsRequest{}, 2,
			func(page int) []*measurev1.Result {
				if page > 0 {
					return nil
				}
				return slices.Concat(hourlies("a", "b", 7), hourlies("a", "a", 1), hourlies("c", "a", 0))
			}, [][]string{{"a>b@0", "a>b@1"}, {"a>b@2", "a>b@7"}, {"a>c@0", "a>c@1"}, {"b>a@5", "c>a@0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, c := storeOnly(t)
			ctx := testnet.Ctx(t, 10*time.Second)
			rollUp(t, ctx, st, seed)
			var between func(int)
			if tt.between != nil {
				between = func(page int) {
					if rs := tt.between(page); rs != nil {
						rollUp(t, ctx, st, rs)
					}
				}
			}
			if got := walk(t, ctx, listRollups(c, tt.req), tt.size, between); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pages %v\nwant  %v", got, tt.want)
			}
		})
	}
}

func TestListResultsPagesOverGRPC(t *testing.T) {
	st, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	if err := st.AddResults(ctx, slices.Concat(hourlies("a", "b", 0, 1, 2, 3), hourlies("b", "a", 0))); err != nil {
		t.Fatal(err)
	}
	list := func(ctx context.Context, size uint32, token string) ([]string, string, error) {
		resp, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: "a", DstNode: "b", PageSize: size, PageToken: token})
		var ids []string
		for _, r := range resp.GetResults() {
			ids = append(ids, r.GetTestId())
		}
		return ids, resp.GetNextPageToken(), err
	}
	got := walk(t, ctx, list, 2, func(page int) {
		if page == 0 { // one before the cursor, one after
			if err := st.AddResults(ctx, []*measurev1.Result{hourly("a", "b", -1), hourly("a", "b", 9)}); err != nil {
				t.Fatal(err)
			}
		}
	})
	want := [][]string{{"a-b-0", "a-b-1"}, {"a-b-2", "a-b-3"}, {"a-b-9"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pages %v\nwant  %v", got, want)
	}
}

func TestListProbeSeriesPages(t *testing.T) {
	st, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	const period = 10 * time.Second
	report := func(i int) series.Report {
		return series.Report{Src: "node-a", Seq: uint64(i + 1), Start: start.Add(time.Duration(i) * period), Period: period,
			Summaries: []series.Summary{{Dst: "node-b", Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP,
				Sent: 10, Received: uint32(1 + i%10), RTTMin: time.Millisecond, RTTMedian: time.Millisecond, RTTP90: time.Millisecond,
				RTTMax: time.Millisecond, Status: measurev1.Status_STATUS_OK}}}
	}
	add := func(from, to int) {
		var rs []series.Report
		for i := from; i < to; i++ {
			rs = append(rs, report(i))
		}
		if _, err := st.AppendReports(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 20)
	if n, err := st.CompactSeries(ctx, start.Add(12*period)); err != nil || n == 0 { // some in chunks, the rest in the head
		t.Fatalf("CompactSeries = %d, %v; want some compacted", n, err)
	}
	add(20, 25)
	list := func(req *meshv1.ListProbeSeriesRequest) pageFn {
		return func(ctx context.Context, size uint32, token string) ([]string, string, error) {
			req.PageSize, req.PageToken = size, token
			resp, err := c.ListProbeSeries(ctx, req)
			var ns []string
			for _, s := range resp.GetSamples() {
				ns = append(ns, fmt.Sprint(int(s.GetPeriodStart().AsTime().Sub(start)/period)))
			}
			return ns, resp.GetNextPageToken(), err
		}
	}
	pair := func() *meshv1.ListProbeSeriesRequest {
		return &meshv1.ListProbeSeriesRequest{SrcNode: "node-a", DstNode: "node-b", Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP}
	}
	seq := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	ranged := pair()
	ranged.StartTime, ranged.EndTime = timestamppb.New(start.Add(5*period)), timestamppb.New(start.Add(15*period))
	tests := []struct {
		name    string
		req     *meshv1.ListProbeSeriesRequest
		size    uint32
		between func(page int)
		want    [][]string
	}{
		{"one page, default size", pair(), 0, nil, [][]string{seq(0, 25)}},
		{"first, middle and last, across chunks and head", pair(), 10, nil, [][]string{seq(0, 10), seq(10, 20), seq(20, 25)}},
		{"a range", ranged, 4, nil, [][]string{seq(5, 9), seq(9, 13), seq(13, 15)}},
		{"an unknown series", &meshv1.ListProbeSeriesRequest{SrcNode: "node-b", DstNode: "node-a", Path: measurev1.Path_PATH_HOST_TO_HOST,
			Kind: measurev1.ProbeKind_PROBE_KIND_ICMP}, 5, nil, [][]string{nil}},
		{"new periods between pages come on later pages", pair(), 12, func(page int) {
			if page == 0 {
				add(25, 30)
			}
		}, [][]string{seq(0, 12), seq(12, 24), seq(24, 30)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := walk(t, ctx, list(tt.req), tt.size, tt.between); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pages %v\nwant  %v", got, tt.want)
			}
		})
	}
	// A token of the whole day is refused for another range, and another
	// kind.
	first := pair()
	first.PageSize = 3
	resp, err := c.ListProbeSeries(ctx, first)
	if err != nil || resp.GetNextPageToken() == "" {
		t.Fatalf("ListProbeSeries: %v, %v", resp, err)
	}
	other := pair()
	other.Kind = measurev1.ProbeKind_PROBE_KIND_TCP
	for _, req := range []*meshv1.ListProbeSeriesRequest{ranged, other} {
		req.PageToken = resp.GetNextPageToken()
		if _, err := c.ListProbeSeries(ctx, req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "page_token") {
			t.Errorf("token of another series or range: %v, want InvalidArgument naming page_token", err)
		}
	}
}

// A bad page_size, limit or page_token is INVALID_ARGUMENT naming the
// field, for every listing.
func TestListingsRefuseBadPages(t *testing.T) {
	st, c := storeOnly(t)
	ctx := testnet.Ctx(t, 10*time.Second)
	createRuns(t, ctx, st, runIDs(3, 0))
	if err := st.AddResults(ctx, slices.Concat(hourlies("a", "b", 0, 1, 2), hourlies("b", "a", 0))); err != nil {
		t.Fatal(err)
	}
	runs, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 1})
	if err != nil || runs.GetNextPageToken() == "" {
		t.Fatalf("ListRuns: %v, %v", runs, err)
	}
	results, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: "a", PageSize: 1})
	if err != nil || results.GetNextPageToken() == "" {
		t.Fatalf("ListResults: %v, %v", results, err)
	}
	runsTok, resultsTok := runs.GetNextPageToken(), results.GetNextPageToken()
	damaged := []byte(runsTok)
	damaged[len(damaged)-3] ^= 0x04
	series := func(size uint32, token string) *meshv1.ListProbeSeriesRequest {
		return &meshv1.ListProbeSeriesRequest{SrcNode: "node-a", DstNode: "node-b", Path: measurev1.Path_PATH_HOST_TO_HOST,
			Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, PageSize: size, PageToken: token}
	}
	tests := []struct {
		name  string
		call  func() error
		field string
	}{
		{"runs: garbled", func() error {
			_, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{PageToken: "not a token!"})
			return err
		}, "page_token"},
		{"runs: damaged", func() error {
			_, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{PageToken: string(damaged)})
			return err
		}, "page_token"},
		{"runs: a results token", func() error { _, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{PageToken: resultsTok}); return err }, "page_token"},
		{"runs: page_size too large", func() error {
			_, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: store.MaxRunsPageSize + 1})
			return err
		}, "page_size"},
		{"runs: limit too large", func() error { _, err := c.ListRuns(ctx, &meshv1.ListRunsRequest{Limit: 1001}); return err }, "limit"}, //nolint:staticcheck // SA1019: the deprecated limit is what this case checks
		{"results: token of another filter", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: "a", Test: measurev1.Test_TEST_PING, PageToken: resultsTok})
			return err
		}, "page_token"},
		{"results: token of another source", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: "b", PageToken: resultsTok})
			return err
		}, "page_token"},
		{"results: token of another origin", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: "a", Origin: measurev1.RunOrigin_RUN_ORIGIN_MONITOR, PageToken: resultsTok})
			return err
		}, "page_token"},
		{"results: no such origin", func() error {
			_, err := c.ListResults(ctx, &meshv1.ListResultsRequest{SrcNode: "a", Origin: measurev1.RunOrigin(7)})
			return err
		}, "origin 7"},
		{"rollups: a runs token", func() error {
			_, err := c.ListRollups(ctx, &meshv1.ListRollupsRequest{PageToken: runsTok})
			return err
		}, "page_token"},
		{"rollups: limit too large", func() error { _, err := c.ListRollups(ctx, &meshv1.ListRollupsRequest{Limit: 100001}); return err }, "limit"}, //nolint:staticcheck // SA1019: the deprecated limit is what this case checks
		{"rollups: page_size too large", func() error {
			_, err := c.ListRollups(ctx, &meshv1.ListRollupsRequest{PageSize: store.MaxRollupsPageSize + 1})
			return err
		}, "page_size"},
		{"series: a results token", func() error { _, err := c.ListProbeSeries(ctx, series(0, resultsTok)); return err }, "page_token"},
		{"series: page_size too large", func() error {
			_, err := c.ListProbeSeries(ctx, series(store.MaxSeriesPageSize+1, ""))
			return err
		}, "page_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.field) {
				t.Errorf("err = %v, want InvalidArgument naming %s", err, tt.field)
			}
		})
	}
}
