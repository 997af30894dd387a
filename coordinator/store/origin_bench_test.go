package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// BenchmarkListResultsOrigin lists a pair's week of results, a continuous
// light mesh's ping every 30 s (20,160 monitor runs of one result each)
// and 100 on-demand results, once whole and once for the clients' runs
// alone (Filter.Origin, which reads each run's header), and reports
// origin_cost_ratio: the filtered listing's time over the whole one's, in
// one run (the fastest of each side).
func BenchmarkListResultsOrigin(b *testing.B) {
	ctx := testnet.Ctx(b, 10*time.Minute)
	s, _ := openTemp(b)
	const monitorRuns, onDemand = 7 * 24 * 120, 100
	start := t0
	var results []*measurev1.Result
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(128) // concurrent CreateRuns share the store's batched commits
	for i := range monitorRuns {
		id := fmt.Sprintf("MON%06d", i)
		g.Go(func() error {
			return s.CreateRun(gctx, &measurev1.Run{RunId: id, Origin: measurev1.RunOrigin_RUN_ORIGIN_MONITOR, Spec: &measurev1.RunSpec{Label: "monitor-light"}})
		})
		results = append(results, result(id, "t0", "node-1", "node-2", measurev1.Path_PATH_POD_TO_POD, measurev1.Test_TEST_PING, start.Add(time.Duration(i)*30*time.Second)))
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := s.CreateRun(ctx, &measurev1.Run{RunId: "CLIENT", Origin: measurev1.RunOrigin_RUN_ORIGIN_CLIENT}); err != nil {
		b.Fatal(err)
	}
	for i := range onDemand {
		results = append(results, result("CLIENT", fmt.Sprintf("t%d", i), "node-1", "node-2", measurev1.Path_PATH_POD_TO_POD, measurev1.Test_TEST_PING,
			start.Add(time.Duration(i)*time.Hour+time.Second)))
	}
	for i := 0; i < len(results); i += 5000 {
		if err := s.AddResults(ctx, results[i:min(i+5000, len(results))]); err != nil {
			b.Fatal(err)
		}
	}
	list := func(f Filter) (time.Duration, int) {
		t := time.Now()
		n, token := 0, ""
		for {
			page, next, err := s.ListResults(context.Background(), f, MaxPageSize, token)
			if err != nil {
				b.Fatal(err)
			}
			n += len(page)
			if token = next; token == "" {
				return time.Since(t), n
			}
		}
	}
	pair := Filter{SrcNode: "node-1", DstNode: "node-2"}
	clients := pair
	clients.Origin = measurev1.RunOrigin_RUN_ORIGIN_CLIENT
	var minAll, minClients time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ta, na := list(pair)
		tc, nc := list(clients)
		if na != monitorRuns+onDemand || nc != onDemand {
			b.Fatalf("listed %d and %d results, want %d and %d", na, nc, monitorRuns+onDemand, onDemand)
		}
		if i == 0 || ta < minAll {
			minAll = ta
		}
		if i == 0 || tc < minClients {
			minClients = tc
		}
	}
	b.StopTimer()
	b.ReportMetric(minClients.Seconds()/minAll.Seconds(), "origin_cost_ratio")
	b.ReportMetric(float64(minAll.Microseconds())/1e3, "all_ms")
	b.ReportMetric(float64(minClients.Microseconds())/1e3, "clients_ms")
}
