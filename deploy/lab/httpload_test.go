package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent/httptarget"
	agentrunner "github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The http_load lab test's target ports on the destination node: the
// agent's real HTTP target (agent/httptarget) and a test-only target
// that answers every request with a 503, as an overloaded backend does.
const (
	loadTargetPort = 18480
	loadErrorPort  = 18481
	// loadServerRole is the targets' server process (serveHTTPLoad).
	loadServerRole = "http-load"
	// loadServerLife bounds the server's life, whatever its parent does.
	loadServerLife = 2 * time.Minute
)

func init() { serverProcs[loadServerRole] = serveHTTPLoad }

// serveHTTPLoad is the http_load test's server process: TestHTTPLoad
// starts the test binary as it (startServerProc) inside the destination
// node's namespace, to serve agent/httptarget on loadTargetPort and a 503
// target on loadErrorPort for at most loadServerLife. spec is "NODE
// NETWORK", the names the HTTP target's answer carries.
func serveHTTPLoad(spec string) error {
	node, network, _ := strings.Cut(spec, " ")
	ctx, cancel := context.WithTimeout(context.Background(), loadServerLife)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	for port, h := range map[int]http.Handler{
		loadTargetPort: httptarget.Handler(node, network),
		loadErrorPort: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}),
	} {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
		g.Go(func() error {
			if err := httptarget.Serve(ctx, l, h); err != nil {
				return fmt.Errorf("port %d: %w", port, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// TestHTTPLoad runs the agent's runner with the real ab between two lab
// nodes (host to host, and pod to pod with keep-alive) against the real
// HTTP target in the other node's namespace: OK, requests per second
// above 0, no failure, percentiles set and in order. Against the target
// answering 503, every request is a failure (ab's own "Failed requests"
// says 0), and a port nothing listens on is REFUSED.
func TestHTTPLoad(t *testing.T) {
	requireLab(t)
	testskip.Tools(t, "apache2-utils; deploy/lab/install-deps.sh installs it", "ab")
	l := upLab(t, Config{Prefix: testPrefix(t), Nodes: 2, Mode: ModeHostGW, Logger: testutil.StreamLogger(t)})
	src, dst := l.Nodes[0], l.Nodes[1]
	for _, ns := range []struct{ path, network string }{{dst.HostNetNSPath, "host"}, {dst.PodNetNSPath, "pod"}} {
		checkLabNS(t, ns.path)
		startServerProc(t, ns.path, loadServerRole, dst.Name+" "+ns.network)
		for _, port := range []int{loadTargetPort, loadErrorPort} {
			waitListening(t, ns.path, "t", port)
		}
	}
	checkLabNS(t, src.HostNetNSPath)
	checkLabNS(t, src.PodNetNSPath)
	r := agentrunner.New(agentrunner.Config{Logger: testutil.StreamLogger(t), NetNS: map[measurev1.Network]string{
		measurev1.Network_NETWORK_HOST: src.HostNetNSPath,
		measurev1.Network_NETWORK_POD:  src.PodNetNSPath,
	}})
	load := func(requests, concurrency uint32, keepAlive bool) *measurev1.TestSpec {
		return &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_HttpLoad{HttpLoad: &measurev1.HttpLoadParams{
			Requests: requests, Concurrency: concurrency, KeepAlive: keepAlive, Timeout: durationpb.New(30 * time.Second)}}}
	}
	healthy := func(t *testing.T, m *measurev1.HttpLoadMetrics) {
		if m.GetSuccessfulRequests() != m.GetRequests() || m.GetFailedRequests() != 0 || m.GetCompletedRequests() != m.GetRequests() {
			t.Errorf("successful %d, failed %d, completed %d of %d: want every request a success",
				m.GetSuccessfulRequests(), m.GetFailedRequests(), m.GetCompletedRequests(), m.GetRequests())
		}
		if !(m.GetRequestsPerSecond() > 0) || !(m.GetTransferRateBps() > 0) || !(m.GetLatencyMeanSeconds() > 0) {
			t.Errorf("rps %v, transfer %v bit/s, mean latency %v s: want all above 0", m.GetRequestsPerSecond(), m.GetTransferRateBps(), m.GetLatencyMeanSeconds())
		}
		// ab's table is in whole ms: below 1 ms a percentile is 0; the
		// longest request of thousands is not.
		p := []float64{m.GetLatencyP50Seconds(), m.GetLatencyP90Seconds(), m.GetLatencyP95Seconds(), m.GetLatencyP99Seconds(), m.GetLatencyMaxSeconds()}
		for i := 1; i < len(p); i++ {
			if p[i] < p[i-1] {
				t.Errorf("percentiles out of order: %v", p)
			}
		}
		// On veth the slowest of thousands of requests takes milliseconds,
		// seconds only on a machine on its knees: a slip of ms stored as
		// s (tens of "seconds") lands outside, as does a mean latency
		// stored in ms.
		if !(p[4] > 0) || p[4] > 3 {
			t.Errorf("latency_max_seconds %v: want in (0, 3]", p[4])
		}
		if v := m.GetLatencyMeanSeconds(); !(v > 1e-5 && v < 1) {
			t.Errorf("latency_mean_seconds %v: want in (1e-05, 1)", v)
		}
	}
	tests := []struct {
		name    string
		network measurev1.Network
		target  string
		port    uint32
		spec    *measurev1.TestSpec
		want    measurev1.Status
		check   func(t *testing.T, m *measurev1.HttpLoadMetrics)
	}{
		{"host-host, the agent's HTTP target", measurev1.Network_NETWORK_HOST, dst.HostIP.String(), loadTargetPort, load(3000, 20, false),
			measurev1.Status_STATUS_OK, healthy},
		{"pod-pod keep-alive, the agent's HTTP target", measurev1.Network_NETWORK_POD, dst.PodIP.String(), loadTargetPort, load(3000, 20, true),
			measurev1.Status_STATUS_OK, func(t *testing.T, m *measurev1.HttpLoadMetrics) {
				healthy(t, m)
				if m.GetKeepAliveRequests() == 0 {
					t.Errorf("keep_alive_requests 0 with -k")
				}
			}},
		{"host-host, a target answering 503", measurev1.Network_NETWORK_HOST, dst.HostIP.String(), loadErrorPort, load(500, 10, false),
			measurev1.Status_STATUS_OK, func(t *testing.T, m *measurev1.HttpLoadMetrics) {
				if m.GetFailedRequests() != 500 || m.GetSuccessfulRequests() != 0 || m.GetNon_2XxResponses() != 500 {
					t.Errorf("failed %d, successful %d, non-2xx %d of 500: want every request a failure",
						m.GetFailedRequests(), m.GetSuccessfulRequests(), m.GetNon_2XxResponses())
				}
			}},
		{"host-host, nothing listens", measurev1.Network_NETWORK_HOST, dst.HostIP.String(), loadErrorPort + 1, load(100, 5, false),
			measurev1.Status_STATUS_REFUSED, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			results := r.Run(ctx, &agentv1.RunClient{Spec: tt.spec, Network: tt.network, TargetIp: tt.target, Port: tt.port})
			if len(results) != 1 {
				t.Fatalf("%d results, want 1", len(results))
			}
			res := results[0]
			t.Logf("%s %s: %v %q %v", res.GetToolVersion(), res.GetTargetAddress(), res.GetStatus(), res.GetMessage(), res.GetHttpLoad())
			if res.GetStatus() != tt.want {
				t.Fatalf("status %v %q, want %v", res.GetStatus(), res.GetMessage(), tt.want)
			}
			if tt.check != nil {
				tt.check(t, res.GetHttpLoad())
			}
		})
	}
}
