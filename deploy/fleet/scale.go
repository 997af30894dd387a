package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	// Window is how long the coordinator is measured once every agent holds
	// its plan and two report intervals went by; zero means two report
	// intervals (at least 30 s).
	Window time.Duration
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
	// holding a plan with every other agent.
	PlanLatency time.Duration
	// CPUPercent is the coordinator's CPU over the window, in % of one
	// core; RSSMB and PeakRSSMB its resident memory at the end and at its
	// peak.
	CPUPercent, RSSMB, PeakRSSMB float64
	// IngestPerS is summaries stored per second over the window.
	IngestPerS float64
	// Fleet are the fleet's counters at the end.
	Fleet Stats
}

// String is the benchmark's line.
func (r ScaleResult) String() string {
	mode := "reports"
	if r.PlansOnly {
		mode = "plans-only"
	}
	return fmt.Sprintf("nodes=%d interval=%v report=%v mode=%s coverage=%.3f plan_latency_s=%.1f coord_cpu_pct=%.1f coord_rss_mb=%.0f coord_peak_rss_mb=%.0f ingest_per_s=%.0f plans_refused=%d session_errors=%d",
		r.Nodes, r.Interval, r.ReportInterval, mode, r.Coverage, r.PlanLatency.Seconds(), r.CPUPercent, r.RSSMB, r.PeakRSSMB, r.IngestPerS,
		r.Fleet.PlanRefused, r.Fleet.SessionErrors)
}

// BenchScale runs a real coordinator process with a probes config,
// connects a simulated fleet of cfg.Nodes agents to it from this process,
// waits until every agent holds its plan, lets two report intervals pass,
// and measures the coordinator over cfg.Window. Everything speaks on
// loopback only.
func BenchScale(ctx context.Context, cfg ScaleConfig) (ScaleResult, error) {
	res := ScaleResult{Nodes: cfg.Nodes, Interval: cfg.Interval, ReportInterval: cfg.ReportInterval, PlansOnly: cfg.PlansOnly}
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
	cmd := exec.CommandContext(ctx, cfg.Coordinator, "serve", "--listen", agentAddr, "--socket", filepath.Join(cfg.WorkDir, "coordinator.sock"),
		"--db", filepath.Join(cfg.WorkDir, "meshperf.db"), "--config", conf, "--metrics-listen", metricsAddr, "--retention", "0", "--log-level", "warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logFile, err := os.Create(filepath.Join(cfg.WorkDir, "coordinator.log"))
	if err != nil {
		return res, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start the coordinator: %w", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	if err := waitListening(ctx, metricsAddr, 30*time.Second); err != nil {
		return res, fmt.Errorf("coordinator not up (see %s): %w", logFile.Name(), err)
	}
	f, err := New(Config{Coordinator: agentAddr, Nodes: cfg.Nodes, Reports: !cfg.PlansOnly, Gossip: cfg.Gossip, JoinOver: cfg.JoinOver, Logger: log})
	if err != nil {
		return res, err
	}
	fctx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.Run(fctx) }()
	defer func() { stopFleet(); <-fleetDone }()

	// Every agent holds its full plan.
	joinBound := cfg.JoinOver + 60*time.Second + time.Duration(cfg.Nodes)*20*time.Millisecond
	if err := poll(ctx, joinBound, func() bool { return f.Snapshot().Current == int64(cfg.Nodes) }); err != nil {
		s := f.Snapshot()
		return res, fmt.Errorf("after %v, %d of %d agents hold a plan with every other agent (%d registered, %d refused plans): %w",
			joinBound, s.Current, cfg.Nodes, s.Registered, s.PlanRefused, err)
	}
	log.Info("every agent holds its plan", "nodes", cfg.Nodes, "plan_latency_max", time.Duration(f.Snapshot().PlanLatencyMaxSeconds*float64(time.Second)))
	if !cfg.PlansOnly {
		if err := sleep(ctx, 2*cfg.ReportInterval); err != nil {
			return res, err
		}
	} else if err := sleep(ctx, 5*time.Second); err != nil { // idle: the join is over
		return res, err
	}
	cpu0, err := procTicks(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	m0, err := scrape(ctx, metricsAddr)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := sleep(ctx, cfg.Window); err != nil {
		return res, err
	}
	cpu1, err := procTicks(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	m1, err := scrape(ctx, metricsAddr)
	if err != nil {
		return res, err
	}
	wall := time.Since(t0).Seconds()
	res.CPUPercent = 100 * float64(cpu1-cpu0) / clockTicks / wall
	res.IngestPerS = (m1["meshperf_probe_summaries_total"] - m0["meshperf_probe_summaries_total"]) / wall
	res.Coverage = m1["meshperf_probe_coverage_ratio"]
	res.RSSMB, res.PeakRSSMB, err = procRSS(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.Fleet = f.Snapshot()
	res.PlanLatency = time.Duration(res.Fleet.PlanLatencyMaxSeconds * float64(time.Second))
	return res, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on
// Linux).
const clockTicks = 100

// procTicks is a process's user + system CPU time, in clock ticks.
func procTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may hold spaces) start after ") ".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return utime + stime, nil
}

// procRSS is a process's resident memory now and at its peak, in MB.
func procRSS(pid int) (rss, peak float64, err error) {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			peak = kb / 1024
		}
	}
	return rss, peak, sc.Err()
}

// scrape reads the coordinator's /metrics into name -> value (series
// without labels, or the sum over a family's series).
func scrape(ctx context.Context, addr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	out := map[string]float64{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			}
		}
	}
	return out, nil
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitListening waits until addr accepts a TCP connection.
func waitListening(ctx context.Context, addr string, bound time.Duration) error {
	return poll(ctx, bound, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// errPollTimeout is poll's error when its bound passed.
var errPollTimeout = errors.New("timed out")

// poll calls cond every 100 ms until it holds, ctx ends or bound passes.
func poll(ctx context.Context, bound time.Duration, cond func() bool) error {
	deadline := time.Now().Add(bound)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return errPollTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
