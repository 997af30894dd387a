package remotewrite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// meshResults are the ping results of n sources to 100 destinations each
// in a 1,000-node mesh, one run.
func meshResults(n int) []*measurev1.Result {
	out := make([]*measurev1.Result, 0, n*100)
	for i := range n {
		for j := range 100 {
			out = append(out, result(fmt.Sprintf("node-%04d", i), fmt.Sprintf("node-%04d", (i+1+j*7)%1000), pp, ping,
				1e-4+float64(i*j)*1e-7, t0.Add(time.Duration(i*100+j)*time.Millisecond)))
		}
	}
	return out
}

// BenchmarkQueue reports how fast results become samples that are
// encoded, compressed and accepted by a loopback receiver (samples/s), the
// bytes per sample on the wire, and the queue's memory per sample.
func BenchmarkQueue(b *testing.B) {
	b.Run("send", func(b *testing.B) {
		var wire atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			wire.Add(n)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		w, err := New(Config{URL: srv.URL + "/api/v1/write", BatchWait: time.Millisecond, QueueSamples: 1 << 22})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		results := meshResults(100) // 10,000 pair samples and 2,000 node samples per run
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			id := fmt.Sprint("run-", i)
			for _, r := range results {
				r.RunId = id
			}
			w.RunStarted(id)
			w.Recorded(results)
			w.RunEnded(id, measurev1.RunState_RUN_STATE_SUCCEEDED)
		}
		total := w.Stats().Sent + int64(w.Stats().Queued) + int64(w.Stats().InFlight)
		for w.Stats().Sent < total {
			time.Sleep(time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		<-done //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
		st := w.Stats()
		if st.Dropped+st.Failed > 0 {
			b.Fatalf("stats %+v", st)
		}
		b.ReportMetric(float64(st.Sent)/elapsed.Seconds(), "samples/s")
		b.ReportMetric(float64(wire.Load())/float64(st.Sent), "wire-bytes/sample")
		b.ReportMetric(float64(st.Sent)/float64(st.Requests), "samples/request")
	})
	b.Run("memory", func(b *testing.B) {
		const n = 1_000_000
		reports := make([]series.Report, 1000)
		for i := range reports {
			r := series.Report{Src: fmt.Sprintf("node-%04d", i), Start: t0, Period: 10 * time.Second}
			for j := range 333 { // 3 samples each: loss, median, p90
				r.Summaries = append(r.Summaries, series.Summary{Dst: fmt.Sprintf("node-%04d", j), Path: hh,
					Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 10, Received: 10, RTTMedian: time.Millisecond, RTTP90: time.Millisecond})
			}
			reports[i] = r
		}
		for range b.N {
			w, err := New(Config{URL: "http://127.0.0.1:1/api/v1/write", QueueSamples: n})
			if err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			w.Reports(reports)
			took := time.Since(start)
			runtime.GC()
			runtime.ReadMemStats(&after)
			queued := w.Stats().Queued
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(queued), "queue-bytes/sample")
			b.ReportMetric(float64(queued)/took.Seconds(), "enqueued-samples/s")
			runtime.KeepAlive(w)
		}
	})
}
