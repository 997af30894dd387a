package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/testskip"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestHTTPLoadRun triggers http_load through the coordinator on a lab of
// two nodes: each agent runs ab against the other agent's registered HTTP
// target (host-host, pod-pod and through the ClusterIP), every load is OK
// without a failure, and the results table shows requests per second,
// percentiles and failures.
func TestHTTPLoadRun(t *testing.T) {
	testskip.Tools(t, "apache2-utils; deploy/lab/install-deps.sh installs it", "ab")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, lab.Config{Nodes: 2, Mode: lab.ModeHostGW})
	stdout, stderr, err := e.cli(ctx, "trigger", "-o", "json", "--tests", "http_load", "--paths", "host-host,pod-pod,pod-service",
		"--requests", "500", "--concurrency", "10", "--keep-alive", "--load-timeout", "20s", "--repeats", "1")
	if err != nil {
		t.Fatalf("trigger: %v\nstderr:\n%s", err, stderr)
	}
	if got, want := lastLine(stderr), "6/6 pair-paths OK"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	var done meshv1.WatchRunResponse
	decode(t, stdout, &done)
	if n := len(done.GetResults()); n != 6 {
		t.Fatalf("%d results, want 6 (2 ordered pairs x 3 paths)", n)
	}
	for _, r := range done.GetResults() {
		m := r.GetHttpLoad()
		if r.GetStatus() != measurev1.Status_STATUS_OK || m == nil {
			t.Errorf("%s->%s %v: %v %q, want OK with http_load metrics", r.GetSrcNode(), r.GetDstNode(), r.GetPath(), r.GetStatus(), r.GetMessage())
			continue
		}
		if m.GetSuccessfulRequests() != 500 || m.GetFailedRequests() != 0 || !(m.GetRequestsPerSecond() > 0) ||
			m.GetKeepAliveRequests() == 0 || !(m.GetLatencyMaxSeconds() > 0) || !strings.HasPrefix(r.GetToolVersion(), "ApacheBench") {
			t.Errorf("%s->%s %v: %s %v", r.GetSrcNode(), r.GetDstNode(), r.GetPath(), r.GetToolVersion(), m)
		}
	}
	stdout, _, err = e.cli(ctx, "results", "--run", done.GetRun().GetRunId(), "--test", "http_load")
	if err != nil || !strings.Contains(stdout, "req/s") || !strings.Contains(stdout, "0/500 failed") {
		t.Errorf("results table (%v) does not show the load's figures:\n%s", err, stdout)
	}
}
