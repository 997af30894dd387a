package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// maxEmptyPages bounds the empty pages in a row that follow takes: a page
// reads at most 65,536 keys of the store, so 10,000 are 655 million keys,
// more than a store holds.
const maxEmptyPages = 10_000

// lister fetches one page of a listing: at most size items after token
// ("" for the first page); next is "" on the last page.
type lister[T any] func(ctx context.Context, size uint32, token string) (items []T, next string, err error)

// follow calls list page after page from token until want items are in
// (0: until the last page), each call under its own --timeout. It asks
// for at most maxPage items a page and never for more than are still
// wanted, so next (the token of the page after the last item returned,
// "" when the listing ended) resumes exactly there. A page may be short,
// even empty, before the end (the coordinator bounds the keys a page
// reads); a page that is empty and hands back the token it was asked
// with is an error, as following it would loop, and so are more than
// maxEmptyPages empty pages in a row.
func follow[T any](ctx context.Context, o *options, what, token string, want, maxPage int, list lister[T]) (items []T, next string, err error) {
	for empty := 0; ; {
		size := maxPage
		if want > 0 {
			size = min(size, want-len(items))
		}
		callCtx, cancel := o.call(ctx)
		page, next, err := list(callCtx, uint32(size), token)
		cancel()
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", what, err)
		}
		items = append(items, page...)
		switch {
		case next == "", want > 0 && len(items) >= want:
			return items, next, nil
		case len(page) == 0 && next == token:
			return nil, "", fmt.Errorf("%s: %w", what, errors.New("the coordinator returned an empty page and the same page token again"))
		}
		if empty++; len(page) > 0 {
			empty = 0
		} else if empty > maxEmptyPages {
			return nil, "", fmt.Errorf("%s: %d empty pages in a row, each with a next page token", what, empty)
		}
		token = next
	}
}

// listAll pages through ListResults until the end or limit results (0:
// no limit); more reports whether results were left out.
func listAll(ctx context.Context, o *options, client meshv1.MeshServiceClient, req *meshv1.ListResultsRequest, limit int) (out []*measurev1.Result, more bool, err error) {
	out, next, err := follow(ctx, o, "list results", req.GetPageToken(), limit, store.MaxPageSize,
		func(ctx context.Context, size uint32, token string) ([]*measurev1.Result, string, error) {
			req.PageSize, req.PageToken = size, token
			resp, err := client.ListResults(ctx, req)
			return resp.GetResults(), resp.GetNextPageToken(), err
		})
	return out, next != "", err
}

// listRuns pages through ListRuns from token, newest first, until limit
// runs (0: every run); next resumes after the last.
func listRuns(ctx context.Context, o *options, client meshv1.MeshServiceClient, token string, limit int) (runs []*measurev1.Run, next string, err error) {
	return follow(ctx, o, "list runs", token, limit, store.MaxRunsPageSize,
		func(ctx context.Context, size uint32, token string) ([]*measurev1.Run, string, error) {
			resp, err := client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: size, PageToken: token})
			return resp.GetRuns(), resp.GetNextPageToken(), err
		})
}

// withClient dials the coordinator, runs fn and closes the connection.
func withClient(o *options, fn func(meshv1.MeshServiceClient) error) error {
	client, closeConn, err := o.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	return fn(client)
}
