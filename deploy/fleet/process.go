package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/meshperf/meshperf/internal/procstat"
	"github.com/meshperf/meshperf/internal/tick"
)

// This file holds the coordinator process of the benchmarks and what
// reads it from outside: /proc, /metrics, loopback ports and waits.

// Coordinator is a coordinator process started by StartCoordinator.
type Coordinator struct {
	// Cmd is the process; its process group is its own.
	Cmd  *exec.Cmd
	log  *os.File
	once sync.Once
}

// StartCoordinator starts `bin serve` with its store, socket and log in
// workDir (meshperf.db, coordinator.sock, coordinator.log, appended to),
// the config file conf, agents on agentAddr and /metrics on metricsAddr
// (both loopback), no retention, loopback addresses allowed (the fleet's
// agents register 127.1.x.y and 127.2.x.y), and the extra serve flags; it
// returns once /metrics answers (30 s at most).
func StartCoordinator(ctx context.Context, bin, workDir, conf, agentAddr, metricsAddr string, extra ...string) (*Coordinator, error) {
	args := append([]string{"serve", "--listen", agentAddr, "--socket", filepath.Join(workDir, "coordinator.sock"),
		"--db", filepath.Join(workDir, "meshperf.db"), "--config", conf, "--metrics-listen", metricsAddr, "--retention", "0", "--log-level", "warn",
		"--allow-addresses", "loopback"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logFile, err := os.OpenFile(filepath.Join(workDir, "coordinator.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start the coordinator: %w", err)
	}
	c := &Coordinator{Cmd: cmd, log: logFile}
	if err := waitListening(ctx, metricsAddr, 30*time.Second); err != nil {
		c.Kill()
		return nil, fmt.Errorf("coordinator not up (see %s): %w", logFile.Name(), err)
	}
	return c, nil
}

// Stop ends the coordinator with SIGTERM (SIGKILL after 10 s) and waits
// for it; only the first of Stop and Kill acts.
func (c *Coordinator) Stop() { c.once.Do(func() { c.end(syscall.SIGTERM) }) }

// Kill ends the coordinator's process group with SIGKILL at once, as a
// crash would, and waits for it; only the first of Stop and Kill acts.
func (c *Coordinator) Kill() { c.once.Do(func() { c.end(syscall.SIGKILL) }) }

func (c *Coordinator) end(sig syscall.Signal) {
	_ = syscall.Kill(-c.Cmd.Process.Pid, sig)
	done := make(chan struct{})
	go func() { _ = c.Cmd.Wait(); close(done) }()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = syscall.Kill(-c.Cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	_ = c.log.Close()
}

// CPUSeconds is a process's user + system CPU time (every thread), in
// seconds, from /proc/PID/stat (utime and stime, fields 14 and 15, in
// clock ticks). The error names the file.
func CPUSeconds(pid int) (float64, error) {
	s, err := procstat.Read(pid)
	if err != nil {
		return 0, err
	}
	return s.CPUSeconds(), nil
}

// RSS is a process's resident memory now and at its peak (VmRSS and
// VmHWM of /proc/PID/status), in MB (2^20 bytes).
func RSS(pid int) (rss, peak float64, err error) {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = fh.Close() }()
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
	defer func() { _ = resp.Body.Close() }()
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
	defer func() { _ = l.Close() }()
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

// poll calls cond every 100 ms until it holds, ctx ends or bound passes;
// the error of a wait cut short wraps context.DeadlineExceeded when bound
// passed, ctx's error otherwise.
func poll(ctx context.Context, bound time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return tick.Until(ctx, 100*time.Millisecond, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}
