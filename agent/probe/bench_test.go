package probe

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// BenchmarkProberLoopback probes N loopback peers (ICMP, ICMP_MTU and TCP
// on host-host and TCP on host-service; -benchtime is ignored: each
// iteration is one 1 s probe interval, N=PROBE_BENCH_PEERS or 1000) and
// reports allocations per probe, the heap, the process's peak RSS and
// its CPU use in cores (the whole test process, kernel time included:
// loopback replies are answered in this process's syscalls). It asserts
// no timings.
func BenchmarkProberLoopback(b *testing.B) {
	rawOK(b)
	n := 1000
	if v, err := strconv.Atoi(benchPeers()); err == nil && v > 0 {
		n = v
	}
	var got atomic.Uint64
	var summaries atomic.Uint64
	p := loopbackProber(b, nil)
	p.cfg.Report = func(r *agentv1.ProbeReport) {
		got.Add(1)
		summaries.Add(uint64(len(r.Summaries)))
	}
	peers := loopbackPeers(b, n, true) // TCP on host-host is refused, on host-service echoed
	s := testSettings()
	s.ReportInterval = durationpb.New(time.Second)
	s.Kinds = []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, measurev1.ProbeKind_PROBE_KIND_TCP}
	s.Paths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_HOST_TO_SERVICE}
	s.MaxInFlight = protocol.ProbeMaxInFlight
	s.MaxPacketsPerSecond = protocol.ProbeMaxPacketsPerSecond
	if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Settings: s, Upsert: peers}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.N)*time.Second+1500*time.Millisecond)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	if err := p.Run(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	wall := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&after)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
	b.ReportMetric(float64(ru1.Maxrss)/1024, "maxrss-MiB")
	probes := float64(n*4) * (float64(b.N) + 1.5)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/probes, "allocs/probe")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/probes, "B/probe")
	b.ReportMetric(float64(after.HeapSys)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(got.Load()), "reports")
}
