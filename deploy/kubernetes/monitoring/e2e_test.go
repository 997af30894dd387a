package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/deploy/kubernetes/monitoring"
	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/forward"
	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/labtest"
)

// forFactor divides every rule's "for:" in the end-to-end test, and only
// that: a 1m MeshperfNodeFault becomes 6s, so that pending and firing are
// both seen within a few continuous runs. The expressions are unchanged.
const forFactor = 10

// e2eMonitorConfig is the lab coordinator's config: a light continuous
// mesh (ping and a 1 s qperf_tcp_lat, one sample each, over host-host and
// pod-pod) every 10 s, and the in-process probes every 2 s, whose series
// the dashboard shows too.
var e2eMonitorConfig = labtest.LightMeshConfig(1, 2*time.Second)

// TestPrometheusAlertsOnLabFault runs the real Prometheus, in the root
// namespace, scraping a 3-node lab's coordinator (through deploy/lab/forward)
// with the component's rules: MeshperfNodeFault must go pending, then
// firing, on the node a pod-drop fault is injected on (and on no other
// node), and resolve once the fault is cleared; while it fires, every
// dashboard query, its variables set to the lab's nodes, must return at
// least one series.
func TestPrometheusAlertsOnLabFault(t *testing.T) {
	testskip.Root(t, "it builds a lab of network namespaces")
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("missing tool: prometheus (make test-deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // about 2.5 min here; a bound for a loaded CI
	defer cancel()

	bin := t.TempDir()
	if err := labtest.Build(ctx, bin); err != nil {
		t.Fatal(err)
	}
	e := labtest.Start(t, ctx, labtest.Options{
		Name: "mon", BinDir: bin, CoordinatorConfig: e2eMonitorConfig,
		CoordinatorArgs: []string{"--metrics-listen", "127.0.0.1:9090", "--metrics-per-pair"},
	})
	l, c := e.Lab, e.Cluster
	fwd, err := forward.Start(ctx, forward.Config{NetNS: l.ControlPlane().HostNetNSPath, Target: "127.0.0.1:9090"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() })

	prom := startPrometheus(t, ctx, promBin, fwd.Addr())
	waitFor(t, ctx, 60*time.Second, "the coordinator scraped (up == 1)", func() (bool, string) {
		return prom.has(ctx, `up{job="meshperf-coordinator"} == 1`)
	})
	// A clean start: two continuous runs ended, and no finding (agents
	// that were still connecting may have given an early run one).
	waitFor(t, ctx, 120*time.Second, "a clean mesh", func() (bool, string) {
		if ok, why := prom.has(ctx, `sum(meshperf_runs_total) >= 2`); !ok {
			return false, why
		}
		if bad, why := prom.has(ctx, `meshperf_fault or meshperf_probe_fault or ALERTS{alertname="MeshperfNodeFault"}`); bad {
			return false, "findings: " + why
		}
		return true, ""
	})

	faulty := l.Nodes[1].Name
	start := time.Now()
	if err := lab.Inject(ctx, l, lab.Fault{Kind: lab.FaultPodDrop, Node: faulty}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = lab.Clear(context.Background(), l, faulty, lab.FaultPodDrop) })
	alert := fmt.Sprintf(`ALERTS{alertname="MeshperfNodeFault", node=%q}`, faulty)
	seen := map[string]time.Duration{}
	// The alert, and the finding of a continuous run (diagnose), not only
	// the probes' judge's, on the faulty node.
	runFault := fmt.Sprintf(`meshperf_fault{node=%q}`, faulty)
	waitFor(t, ctx, 150*time.Second, "MeshperfNodeFault pending, then firing, and "+runFault, func() (bool, string) {
		states, err := prom.labelValues(ctx, alert, "alertstate")
		if err != nil {
			return false, err.Error()
		}
		kinds, err := prom.labelValues(ctx, runFault, "kind")
		if err != nil {
			return false, err.Error()
		}
		if len(kinds) > 0 {
			states = append(states, "run finding "+strings.Join(kinds, ","))
		}
		for _, s := range states {
			if _, ok := seen[s]; !ok {
				seen[s] = time.Since(start)
			}
		}
		_, pending := seen["pending"]
		_, firing := seen["firing"]
		return pending && firing && len(kinds) > 0, fmt.Sprintf("seen %v", seen)
	})
	t.Logf("on %s, after the fault: %v", faulty, seen)
	if others, err := prom.labelValues(ctx, fmt.Sprintf(`ALERTS{alertname="MeshperfNodeFault", node!=%q}`, faulty), "node"); err != nil || len(others) > 0 {
		t.Errorf("MeshperfNodeFault on other nodes %v (%v): the fault is on %s alone", others, err, faulty)
	}

	checkDashboard(t, ctx, prom, map[string]string{
		"test": "ping", "path": "pod-pod", "src": l.Nodes[0].Name, "dst": l.Nodes[2].Name,
		"__rate_interval": "1m", "__interval": "10s",
	})

	cleared := time.Now()
	if _, err := lab.Clear(ctx, l, faulty, lab.FaultPodDrop); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 120*time.Second, "MeshperfNodeFault resolved", func() (bool, string) {
		firing, why := prom.has(ctx, `ALERTS{alertname="MeshperfNodeFault"}`)
		return !firing, why
	})
	t.Logf("MeshperfNodeFault resolved %v after the fault was cleared", time.Since(cleared).Round(time.Second))
	if t.Failed() || testing.Verbose() {
		logRuns(t, c.LogPath("coordinator"))
	}
}

// checkDashboard runs every dashboard query, with vars, against prom and
// wants each to return a series; a query gets 30 s to (rates need two
// scrapes in their window).
func checkDashboard(t *testing.T, ctx context.Context, prom *prometheus, vars map[string]string) {
	t.Helper()
	qs := expandedQueries(t, vars)
	deadline := time.Now().Add(30 * time.Second)
	for _, q := range qs {
		for {
			ok, why := prom.has(ctx, q.Expr)
			if ok {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Errorf("dashboard %s: %s returns no series: %s", q.Where, q.Expr, why)
				break
			}
			sleep(ctx, time.Second)
		}
	}
	t.Logf("%d dashboard queries checked", len(qs))
}

// prometheus is a running Prometheus's HTTP API on 127.0.0.1.
type prometheus struct {
	base   string
	client *http.Client
}

// startPrometheus starts the prometheus binary in its own process group,
// its TSDB in a temporary directory, scraping target every 2 s and
// evaluating the component's rules (their for: divided by forFactor) as
// often; it is killed, with its group, when the test ends.
func startPrometheus(t *testing.T, ctx context.Context, bin, target string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := monitoring.Rules(monitoring.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	rules = scaleFor(t, rules, forFactor)
	cfg := fmt.Sprintf(`global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [rules.yaml]
scrape_configs:
  - job_name: meshperf-coordinator
    static_configs: [{targets: [%q]}]
`, target)
	for name, b := range map[string][]byte{"rules.yaml": rules, "prometheus.yml": []byte(cfg)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := freePort(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		_ = logf.Close()
		if t.Failed() {
			labtest.LogTail(t, logf.Name(), 60)
		}
	})
	p := &prometheus{base: "http://" + addr, client: &http.Client{Timeout: 10 * time.Second}}
	waitFor(t, ctx, 30*time.Second, "prometheus ready", func() (bool, string) {
		resp, err := p.client.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// scaleFor divides the for: of every rule of the rules file b by factor.
func scaleFor(t *testing.T, b []byte, factor int) []byte {
	t.Helper()
	f := parseRules(t, b)
	for gi := range f.Groups {
		for ri := range f.Groups[gi].Rules {
			r := &f.Groups[gi].Rules[ri]
			if r.For == "" {
				continue
			}
			d, err := time.ParseDuration(r.For)
			if err != nil {
				t.Fatalf("%s: for %q: %v", r.Alert, r.For, err)
			}
			r.For = (d / time.Duration(factor)).String()
		}
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// query runs an instant query and returns the vector's samples' labels.
func (p *prometheus) query(ctx context.Context, expr string) ([]map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %s: %w", expr, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %s, want vector", expr, body.Data.ResultType)
	}
	out := make([]map[string]string, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		out = append(out, r.Metric)
	}
	return out, nil
}

// has reports whether expr returns a series now, and why not (or what).
func (p *prometheus) has(ctx context.Context, expr string) (bool, string) {
	ms, err := p.query(ctx, expr)
	if err != nil {
		return false, err.Error()
	}
	return len(ms) > 0, fmt.Sprintf("%d series %v", len(ms), ms)
}

// labelValues is the values of label among expr's series.
func (p *prometheus) labelValues(ctx context.Context, expr, label string) ([]string, error) {
	ms, err := p.query(ctx, expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		out = append(out, m[label])
	}
	return out, nil
}

// waitFor polls cond every 500 ms until it holds, failing the test after
// limit (or when ctx ends) with what cond said last.
func waitFor(t *testing.T, ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testutil.WaitFor(t, ctx, limit, 500*time.Millisecond, what, func() string {
		ok, why := cond()
		if ok {
			return ""
		}
		if why == "" {
			why = "not yet"
		}
		return why
	})
}

func sleep(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// freePort is a loopback address with a port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// logRuns logs the coordinator's lines about runs and faults.
func logRuns(t *testing.T, file string) {
	b, _ := os.ReadFile(file)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "run ") || strings.Contains(l, "fault") {
			keep = append(keep, l)
		}
	}
	t.Logf("==> %s (runs, faults)\n%s", file, strings.Join(keep, "\n"))
}
