package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// gatedSource holds every ListProbeSeries call until open is closed,
// counting the calls in progress (most: the largest count seen) and by
// source node.
type gatedSource struct {
	*fakeSource
	open chan struct{}

	mu        sync.Mutex
	now, most int
	bySrc     map[string]int
}

func (g *gatedSource) ListProbeSeries(ctx context.Context, req *meshv1.ListProbeSeriesRequest) (*meshv1.ListProbeSeriesResponse, error) {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.bySrc[req.GetSrcNode()]++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.fakeSource.ListProbeSeries(ctx, req)
}

func (g *gatedSource) counts() (now, most int, bySrc map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	by := map[string]int{}
	for k, v := range g.bySrc {
		by[k] = v
	}
	return g.now, g.most, by
}

// TestPairReadsBounded: pair charts asked at once are read at most
// maxPairReads at a time, and the tabs that ask for the same pair, range
// and kind share one read (one call per path), so that tabs polling a
// week of 1 s periods cannot each hold its millions of points.
func TestPairReadsBounded(t *testing.T) {
	g := &gatedSource{fakeSource: meshSource([]string{"a", "b"}, ""), open: make(chan struct{}), bySrc: map[string]int{}}
	u, err := New(Config{Source: g})
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/api/v1/pair?src=a&dst=b&range=7d", "/api/v1/pair?src=a&dst=b&range=7d", "/api/v1/pair?src=a&dst=b&range=7d"}
	for i := range maxPairReads + 2 {
		paths = append(paths, fmt.Sprintf("/api/v1/pair?src=n%d&dst=b&range=7d", i))
	}
	codes := make(chan int, len(paths))
	for _, p := range paths {
		go func() { codes <- serve(t, u, p).StatusCode }()
	}
	testutil.Eventually(t, 10*time.Second, time.Millisecond, "the pair reads to start", func() bool {
		now, _, _ := g.counts()
		return now >= maxPairReads
	})
	time.Sleep(200 * time.Millisecond) // room for reads past the bound to start, were there no bound
	if now, _, _ := g.counts(); now != maxPairReads {
		t.Errorf("%d pair reads at once, want %d", now, maxPairReads)
	}
	close(g.open)
	for range paths {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("status %d", code)
		}
	}
	_, most, bySrc := g.counts()
	if most > maxPairReads {
		t.Errorf("%d pair reads at once at the most, want %d", most, maxPairReads)
	}
	if bySrc["a"] != len(pairPaths) {
		t.Errorf("3 tabs of pair a->b made %d calls, want one read of %d paths", bySrc["a"], len(pairPaths))
	}
}
