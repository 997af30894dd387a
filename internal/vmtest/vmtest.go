// Package vmtest runs a real single-node VictoriaMetrics (Debian's
// victoria-metrics binary) on 127.0.0.1 for tests of the remote-write
// path: started in its own process group with its data in t.TempDir(),
// stopped and started again on the same port and data, read back through
// /api/v1/export after /internal/force_flush, and killed with its children
// at cleanup. Only test files import this package.
package vmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testnet"
)

// Binary is the VictoriaMetrics single-node binary's name.
const Binary = "victoria-metrics"

// VM is one VictoriaMetrics process on 127.0.0.1; not safe for concurrent
// use.
type VM struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string

	t    testing.TB
	dir  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts VictoriaMetrics on a free 127.0.0.1 port with its data in
// a new t.TempDir() and waits (30 s at most) until it is healthy. It skips
// the test when the binary is not installed or with -short, and fails it
// when VictoriaMetrics does not start.
func Start(t testing.TB) *VM {
	t.Helper()
	testnet.Need(t, Binary)
	v := &VM{t: t, dir: t.TempDir(), Addr: fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))}
	v.log = filepath.Join(v.dir, "vm.log")
	t.Cleanup(v.Stop)
	v.Restart()
	return v
}

// WriteURL is its remote-write endpoint.
func (v *VM) WriteURL() string { return "http://" + v.Addr + "/api/v1/write" }

// Restart starts the process again (if stopped) on the same port and data
// and waits until it is healthy.
func (v *VM) Restart() {
	v.t.Helper()
	if v.cmd != nil {
		return
	}
	logf, err := os.OpenFile(v.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		v.t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(Binary,
		"-storageDataPath="+filepath.Join(v.dir, "data"),
		"-httpListenAddr="+v.Addr,
		"-retentionPeriod=100y",
		"-search.disableCache",
		"-loggerLevel=WARN",
		"-memory.allowedPercent=10",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		v.t.Fatalf("start %s: %v", Binary, err)
	}
	v.cmd, v.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(v.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := http.Get("http://" + v.Addr + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-v.done:
			b, _ := os.ReadFile(v.log)
			v.t.Fatalf("%s exited at start: %s", Binary, b)
		case <-ctx.Done():
			v.Stop()
			v.t.Fatalf("%s not healthy on %s within 30 s", Binary, v.Addr)
		case <-tick.C:
		}
	}
}

// Stop ends the process group: SIGTERM, SIGKILL after 10 s; nothing when
// stopped.
func (v *VM) Stop() {
	if v.cmd == nil {
		return
	}
	pgid := v.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-v.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // any child left
	v.cmd = nil
}

// Series is one series of an export: its labels (with __name__), and its
// samples' values and Unix millisecond timestamps in time order.
type Series struct {
	// Metric is the label set, __name__ included.
	Metric map[string]string `json:"metric"`
	// Values are the samples' values.
	Values []float64 `json:"values"`
	// Timestamps are the samples' times, Unix milliseconds.
	Timestamps []int64 `json:"timestamps"`
}

// Export flushes the ingested data to searchable parts and returns every
// series matching the series selector match, all time.
func (v *VM) Export(match string) []Series {
	v.t.Helper()
	resp, err := http.Get("http://" + v.Addr + "/internal/force_flush")
	if err != nil {
		v.t.Fatalf("force flush: %v", err)
	}
	_ = resp.Body.Close()
	q := url.Values{"match[]": {match}, "start": {"0"}}
	resp, err = http.Get("http://" + v.Addr + "/api/v1/export?" + q.Encode())
	if err != nil {
		v.t.Fatalf("export: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		v.t.Fatalf("export %s: %s", match, resp.Status)
	}
	var out []Series
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var s Series
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			v.t.Fatalf("export line %q: %v", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		v.t.Fatalf("export: %v", err)
	}
	return out
}

// ExportUntil exports match (Export) every 100 ms until ok holds of the
// export or 30 s passed, and returns the last export: VictoriaMetrics
// makes a new series searchable a moment after it accepted it.
func (v *VM) ExportUntil(match string, ok func([]Series) bool) []Series {
	v.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got := v.Export(match)
		if ok(got) || time.Now().After(deadline) {
			return got
		}
		<-tick.C
	}
}
