package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/tick"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// ScaleConfig configures BenchScale.
type ScaleConfig struct {
	// Coordinator is the coordinator binary.
	Coordinator string
	// Nodes is the fleet's size.
	Nodes int
	// Interval and ReportInterval are the probes' (the coordinator's
	// config file).
	Interval, ReportInterval time.Duration
	// Kinds and Paths are the probes' (config names); empty means icmp
	// and tcp over host-host and pod-pod.
	Kinds, Paths []string
	// PlansOnly: the agents hold and acknowledge their plans but report
	// nothing.
	PlansOnly bool
	// Gossip makes every agent send gossip views as at a join (see
	// fleet.Config.Gossip): whole at registration, then every 10 minutes.
	Gossip bool
	// JoinOver spreads the registrations; zero means at once.
	JoinOver time.Duration
	// OnDemand also triggers an on-demand mesh (OnDemandTest, host-host, one
	// sample per pair) once the window is over and measures the
	// coordinator's dispatch per test against the fleet's instant answers.
	OnDemand bool
	// OnDemandTest is that mesh's test: ping (the default) or a heavy one
	// (iperf3_tcp: a server and a client per pair, in rounds).
	OnDemandTest measurev1.Test
	// MeshRounds makes that on-demand mesh a run of this many rounds of
	// the full mesh (RunSpec.mesh_rounds: every node in that many pairs);
	// zero means the full mesh (refused past 316 nodes).
	MeshRounds uint32
	// Window is how long the coordinator is measured once every agent holds
	// its plan and two report intervals went by; zero means two report
	// intervals (at least 30 s).
	Window time.Duration
	// StreamsPerConn is how many agents share one gRPC connection; zero
	// means Config's default, one each as real agents.
	StreamsPerConn int
	// Pprof, if set, is the loopback address the coordinator serves its
	// runtime profiles on (serve --pprof-listen), to look into a case.
	Pprof string
	// WorkDir holds the coordinator's files; required.
	WorkDir string
	// Logger receives progress; nil means discard.
	Logger *slog.Logger
}

// ScaleResult is what BenchScale measured.
type ScaleResult struct {
	// Nodes is the fleet's size.
	Nodes int
	// Interval and ReportInterval are the probes'.
	Interval, ReportInterval time.Duration
	// PlansOnly says the agents reported nothing.
	PlansOnly bool
	// Coverage is the coordinator's meshperf_probe_coverage_ratio at the
	// window's end.
	Coverage float64
	// PlanLatency is the longest time from an agent's registration to its
	// holding a plan with every agent registered before it (its plan as
	// of its registration).
	PlanLatency time.Duration
	// Converge is the time from the last registration to every agent's
	// plan listing every other agent; FullPlanLatency the longest time from
	// an agent's registration to that (for the first to join, the whole
	// join wave).
	Converge, FullPlanLatency time.Duration
	// CPUPercent is the coordinator's CPU over the window, in % of one
	// core; RSSMB and PeakRSSMB its resident memory at the end and at its
	// peak.
	CPUPercent, RSSMB, PeakRSSMB float64
	// IngestPerS is summaries stored per second over the window.
	IngestPerS float64
	// Fleet are the fleet's counters at the end.
	Fleet Stats
	// QueryP99 is the 99th percentile of ListProbeSeries over one pair's
	// last 24 h, on the unix socket, while the fleet reports.
	QueryP99 time.Duration
	// BytesPerSample is the store file's size over the samples it holds,
	// once the coordinator stopped and its heads were compacted: a run of
	// minutes, so its chunks hold a few samples each.
	BytesPerSample float64
	// SteadyBytesPerSample is the same on a store that holds a day of one
	// node's reports of the fleet's shape, compacted every SeriesBlock as
	// the coordinator does: the steady state (2 h chunks full).
	SteadyBytesPerSample float64
	// DispatchPerTest is the on-demand ping mesh's wall time over its
	// tests (OnDemand).
	DispatchPerTest time.Duration
	// OnDemandTests is how many tests that mesh had.
	OnDemandTests int
	// OnDemandTest is that mesh's test.
	OnDemandTest measurev1.Test
	// MeshRounds is how many rounds of the full mesh that mesh measured,
	// of MeshRoundCount.
	MeshRounds, MeshRoundCount uint32
	// Diagnose is how long the coordinator took to judge its last report
	// interval (meshperf_probe_judge_seconds).
	Diagnose time.Duration
	// RawRatio is the store's write throughput over a raw bbolt writer of
	// the same bytes in transactions of 1,000 keys (store.RawRatio), on
	// reports shaped like the fleet's.
	RawRatio float64
}

// GrowthPerDayMB is the store's growth per day at the measured ingest
// rate and bytes per sample.
func (r ScaleResult) GrowthPerDayMB() float64 {
	return r.SteadyBytesPerSample * r.IngestPerS * 86400 / 1e6
}

// String is the benchmark's line.
func (r ScaleResult) String() string {
	mode := "reports"
	if r.PlansOnly {
		mode = "plans-only"
	}
	line := fmt.Sprintf("nodes=%d interval=%v report=%v mode=%s coverage=%.3f plan_latency_s=%.1f converge_s=%.1f full_plan_latency_s=%.1f coord_cpu_pct=%.1f coord_rss_mb=%.0f coord_peak_rss_mb=%.0f",
		r.Nodes, r.Interval, r.ReportInterval, mode, r.Coverage, r.PlanLatency.Seconds(), r.Converge.Seconds(), r.FullPlanLatency.Seconds(),
		r.CPUPercent, r.RSSMB, r.PeakRSSMB)
	if !r.PlansOnly {
		line += fmt.Sprintf(" ingest_per_s=%.0f bytes_per_sample=%.2f run_bytes_per_sample=%.2f store_growth_mb_per_day=%.0f query_p99_ms=%.2f raw_bbolt_ratio=%.2f diagnose_ms=%.2f",
			r.IngestPerS, r.SteadyBytesPerSample, r.BytesPerSample, r.GrowthPerDayMB(), float64(r.QueryP99.Microseconds())/1000, r.RawRatio,
			float64(r.Diagnose.Microseconds())/1000)
	}
	if r.OnDemandTests > 0 {
		line += fmt.Sprintf(" ondemand_%s_tests=%d ondemand_mesh_rounds=%d/%d dispatch_ms_per_test=%.2f", testspec.Name(r.OnDemandTest), r.OnDemandTests, r.MeshRounds, r.MeshRoundCount,
			float64(r.DispatchPerTest.Microseconds())/1000)
	}
	return line + fmt.Sprintf(" plans_refused=%d session_errors=%d", r.Fleet.PlanRefused, r.Fleet.SessionErrors)
}

// BenchScale runs a real coordinator process with a probes config,
// connects a simulated fleet of cfg.Nodes agents to it from this process,
// waits until every agent holds its plan, lets two report intervals pass,
// and measures the coordinator over cfg.Window. Everything speaks on
// loopback only.
func BenchScale(ctx context.Context, cfg ScaleConfig) (ScaleResult, error) {
	res := ScaleResult{Nodes: cfg.Nodes, Interval: cfg.Interval, ReportInterval: cfg.ReportInterval, PlansOnly: cfg.PlansOnly}
	// The fleet stands in for N machines but shares this one with the
	// coordinator under test: its garbage collector collects less often
	// (this process's memory is not measured), leaving the cores to the
	// coordinator and to the fleet's protocol work.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Kinds) == 0 {
		cfg.Kinds = []string{"icmp", "tcp"}
	}
	if len(cfg.Paths) == 0 {
		cfg.Paths = []string{"host-host", "pod-pod"}
	}
	if cfg.Window == 0 {
		cfg.Window = max(2*cfg.ReportInterval, 30*time.Second)
	}
	conf := filepath.Join(cfg.WorkDir, "coordinator.yaml")
	yaml := fmt.Sprintf("probes:\n  interval: %v\n  report_interval: %v\n  kinds: [%s]\n  paths: [%s]\n",
		cfg.Interval, cfg.ReportInterval, strings.Join(cfg.Kinds, ", "), strings.Join(cfg.Paths, ", "))
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return res, err
	}
	agentAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	var extra []string
	if cfg.Pprof != "" {
		extra = append(extra, "--pprof-listen", cfg.Pprof)
	}
	coord, err := StartCoordinator(ctx, cfg.Coordinator, cfg.WorkDir, conf, agentAddr, metricsAddr, extra...)
	if err != nil {
		return res, err
	}
	defer coord.Stop()
	cmd := coord.Cmd
	f, err := New(Config{Coordinator: agentAddr, Nodes: cfg.Nodes, StreamsPerConn: cfg.StreamsPerConn, Reports: !cfg.PlansOnly, Gossip: cfg.Gossip, JoinOver: cfg.JoinOver, Logger: log})
	if err != nil {
		return res, err
	}
	fctx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.Run(fctx) }()
	defer func() { stopFleet(); <-fleetDone }() //nolint:errcheck // waits for it to end: stopped here, its error is the stop's

	// Every agent holds its full plan.
	joinBound := cfg.JoinOver + 60*time.Second + time.Duration(cfg.Nodes)*20*time.Millisecond
	if err := poll(ctx, joinBound, func() bool { return f.Snapshot().Current == int64(cfg.Nodes) }); err != nil {
		s := f.Snapshot()
		return res, fmt.Errorf("after %v, %d of %d agents hold a plan with every other agent (%d registered, %d refused plans): %w",
			joinBound, s.Current, cfg.Nodes, s.Registered, s.PlanRefused, err)
	}
	log.Info("every agent holds its plan", "nodes", cfg.Nodes, "plan_latency_max", time.Duration(f.Snapshot().PlanLatencyMaxSeconds*float64(time.Second)))
	if !cfg.PlansOnly {
		if err := tick.Sleep(ctx, 2*cfg.ReportInterval); err != nil {
			return res, err
		}
	} else if err := tick.Sleep(ctx, 5*time.Second); err != nil { // idle: the join is over
		return res, err
	}
	// sample reads the coordinator's CPU ticks and metrics at once.
	sample := func() (cpu float64, metrics map[string]float64, err error) {
		if cpu, err = CPUSeconds(cmd.Process.Pid); err != nil {
			return 0, nil, err
		}
		metrics, err = scrape(ctx, metricsAddr)
		return cpu, metrics, err
	}
	cpu0, m0, err := sample()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := tick.Sleep(ctx, cfg.Window); err != nil {
		return res, err
	}
	cpu1, m1, err := sample()
	if err != nil {
		return res, err
	}
	wall := time.Since(t0).Seconds()
	res.CPUPercent = 100 * (cpu1 - cpu0) / wall
	res.IngestPerS = (m1["meshperf_probe_summaries_total"] - m0["meshperf_probe_summaries_total"]) / wall
	res.Coverage = m1["meshperf_probe_coverage_ratio"]
	res.Diagnose = time.Duration(m1["meshperf_probe_judge_seconds"] * float64(time.Second))
	res.RSSMB, res.PeakRSSMB, err = RSS(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.Fleet = f.Snapshot()
	res.PlanLatency = time.Duration(res.Fleet.FirstPlanMaxSeconds * float64(time.Second))
	res.FullPlanLatency = time.Duration(res.Fleet.PlanLatencyMaxSeconds * float64(time.Second))
	res.Converge = time.Duration(res.Fleet.ConvergeSeconds * float64(time.Second))
	if cfg.OnDemand {
		var run *measurev1.Run
		if res.DispatchPerTest, run, err = onDemandMesh(ctx, filepath.Join(cfg.WorkDir, "coordinator.sock"), cfg.OnDemandTest, cfg.MeshRounds); err != nil {
			return res, err
		}
		res.OnDemandTests, res.MeshRounds, res.MeshRoundCount = int(run.GetTestsPlanned()), run.GetMeshRounds(), run.GetMeshRoundCount()
		res.OnDemandTest = run.GetSpec().GetTests()[0].GetTest()
	}
	if cfg.PlansOnly {
		return res, nil
	}
	if res.QueryP99, err = queryP99(ctx, filepath.Join(cfg.WorkDir, "coordinator.sock"), cfg.Nodes, 200); err != nil {
		return res, err
	}
	stopFleet()
	<-fleetDone //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
	fleetDone <- nil
	coord.Stop()
	if res.BytesPerSample, err = bytesPerSample(ctx, filepath.Join(cfg.WorkDir, "meshperf.db")); err != nil {
		return res, err
	}
	paths, kinds := len(cfg.Paths), len(cfg.Kinds)
	if res.RawRatio, err = store.RawRatio(ctx, cfg.WorkDir, store.FleetReports(cfg.Nodes, paths, kinds, NodeName), 1000); err != nil {
		return res, err
	}
	if res.SteadyBytesPerSample, err = steadyBytesPerSample(ctx, filepath.Join(cfg.WorkDir, "steady.db"), cfg.Nodes, paths, kinds, cfg.ReportInterval); err != nil {
		return res, err
	}
	return res, nil
}

// steadyBytesPerSample fills a new store at path with a day of one node's
// reports every period to nodes-1 peers x paths x kinds (RTTs of a
// loopback-like spread, all answered), compacting every SeriesBlock of
// data as the coordinator does, and divides the file's size by the
// samples.
func steadyBytesPerSample(ctx context.Context, path string, nodes, paths, kinds int, period time.Duration) (float64, error) {
	st, err := store.Open(store.Config{Path: path})
	if err != nil {
		return 0, err
	}
	defer func() { _ = st.Close() }()
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Now().Add(-25 * time.Hour).Truncate(store.SeriesBlock)
	periods := int(24 * time.Hour / period)
	perBlock := int(store.SeriesBlock / period)
	batch := make([]series.Report, 0, 64)
	for i := range periods {
		r := series.Report{Src: NodeName(0), Seq: uint64(i + 1), Start: start.Add(time.Duration(i) * period), Period: period,
			Summaries: store.FleetSummaries(0, nodes, paths, kinds, NodeName, rng)}
		if batch = append(batch, r); len(batch) == cap(batch) || i == periods-1 {
			if _, err := st.AppendReports(ctx, batch); err != nil {
				return 0, err
			}
			batch = batch[:0]
		}
		if (i+1)%perBlock == 0 {
			if _, err := st.CompactSeries(ctx, r.Start.Add(period)); err != nil {
				return 0, err
			}
		}
	}
	if _, err := st.CompactSeries(ctx, time.Now().Add(2*store.SeriesBlock)); err != nil {
		return 0, err
	}
	stats, err := st.SeriesStats(ctx)
	if err != nil {
		return 0, err
	}
	return float64(stats.FileBytes) / float64(stats.Samples), nil
}

// queryP99 asks for n random pairs' last 24 h of host-host ICMP and
// returns the 99th percentile of the answer times.
func queryP99(ctx context.Context, sock string, nodes, n int) (time.Duration, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	mesh := meshv1.NewMeshServiceClient(conn)
	rng := rand.New(rand.NewPCG(1, 2))
	times := make([]time.Duration, 0, n)
	for range n {
		src := rng.IntN(nodes)
		dst := (src + 1 + rng.IntN(nodes-1)) % nodes
		t := time.Now()
		req := &meshv1.ListProbeSeriesRequest{SrcNode: NodeName(src), DstNode: NodeName(dst),
			Path: measurev1.Path_PATH_HOST_TO_HOST, Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, PageSize: store.MaxSeriesPageSize}
		samples := 0
		for pages := 0; ; pages++ { // a day fits one page from 5 s periods up; follow the rest
			resp, err := mesh.ListProbeSeries(ctx, req)
			if err != nil {
				return 0, fmt.Errorf("ListProbeSeries: %w", err)
			}
			samples += len(resp.GetSamples())
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" || pages == 100 {
				break
			}
		}
		if samples == 0 {
			return 0, fmt.Errorf("ListProbeSeries %s->%s: no samples", NodeName(src), NodeName(dst))
		}
		times = append(times, time.Since(t))
	}
	slices.Sort(times)
	return times[len(times)*99/100], nil
}

// onDemandMesh runs MeshRun (test, 0: ping; of meshRounds rounds, 0: all)
// and returns its wall time per test and the ended run.
func onDemandMesh(ctx context.Context, sock string, test measurev1.Test, meshRounds uint32) (time.Duration, *measurev1.Run, error) {
	start := time.Now()
	run, err := MeshRun(ctx, sock, "bench-scale", test, meshRounds)
	if err != nil {
		return 0, nil, err
	}
	return time.Since(start) / time.Duration(run.GetTestsPlanned()), run, nil
}

// MeshRun triggers, through the coordinator's MeshService on the unix
// socket sock, a mesh of test (0: ping) over host-host with one sample
// per pair and the given label, of meshRounds rounds of the full mesh (0:
// all of them), and waits for it to end (10 minutes at most). It returns
// the ended run (its planned tests too); an error if the run planned no
// test or did not succeed, or the last state seen if it did not end in
// time. Replies up to 64 MiB are taken (a full mesh of 300 nodes plans
// 89,700 tests).
func MeshRun(ctx context.Context, sock, label string, test measurev1.Test, meshRounds uint32) (*measurev1.Run, error) {
	if test == measurev1.Test_TEST_UNSPECIFIED {
		test = measurev1.Test_TEST_PING
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	mesh := meshv1.NewMeshServiceClient(conn)
	spec := &measurev1.RunSpec{Label: label, Repeats: 1, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Tests: []*measurev1.TestSpec{{Test: test}}, MeshRounds: meshRounds}
	trig, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("trigger the %s mesh: %w", testspec.Name(test), err)
	}
	id := trig.GetRun().GetRunId()
	var run *measurev1.Run
	wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	err = tick.Until(wait, 100*time.Millisecond, func() string {
		got, err := mesh.GetRun(wait, &meshv1.GetRunRequest{RunId: id})
		if err != nil {
			return fmt.Sprintf("no answer to GetRun (%v)", err)
		}
		run = got.GetRun()
		if testspec.RunEnded(run.GetState()) {
			return ""
		}
		return fmt.Sprintf("%s after %v, %d of %d tests done", testspec.RunStateName(run.GetState()), 10*time.Minute, run.GetTestsDone(), run.GetTestsPlanned())
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s mesh %s: %w", testspec.Name(test), id, err)
	case run.GetTestsPlanned() == 0:
		return nil, fmt.Errorf("%s mesh %s planned no test", testspec.Name(test), id)
	case run.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED:
		return nil, fmt.Errorf("%s mesh %s ended %v: %s", testspec.Name(test), id, run.GetState(), run.GetMessage())
	}
	return run, nil
}

// bytesPerSample opens the stopped coordinator's store, moves every head
// report into chunks, and divides the file's size by the samples.
func bytesPerSample(ctx context.Context, path string) (float64, error) {
	st, err := store.Open(store.Config{Path: path})
	if err != nil {
		return 0, err
	}
	defer func() { _ = st.Close() }()
	if _, err := st.CompactSeries(ctx, time.Now().Add(2*store.SeriesBlock)); err != nil {
		return 0, err
	}
	stats, err := st.SeriesStats(ctx)
	if err != nil {
		return 0, err
	}
	if stats.Samples == 0 {
		return 0, errors.New("the store holds no sample")
	}
	return float64(stats.FileBytes) / float64(stats.Samples), nil
}
