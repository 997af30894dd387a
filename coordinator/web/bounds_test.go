package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/store"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestMeshBounds: a run with more tests than MaxMeshResults and a probe
// period of more than MaxMeshNodes nodes are answered 422 naming the
// bound, and nothing is read past it.
func TestMeshBounds(t *testing.T) {
	var asked []int
	probes := &Probes{Kinds: []agentv1.ProbeKind{agentv1.ProbeKind_PROBE_KIND_ICMP}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Latest: func(_ context.Context, _ measurev1.Path, _ agentv1.ProbeKind, _ time.Time, limit int) ([]store.LatestSample, error) {
			asked = append(asked, limit)
			return nil, fmt.Errorf("%w: more than %d samples", store.ErrLimit, limit)
		}}
	huge := meshSource([]string{"a", "b"}, "")
	huge.runs[0].TestsPlanned = MaxMeshResults + 1
	for _, tc := range []struct {
		name string
		cfg  Config
		path string
		want string
	}{
		{"run too large", Config{Source: huge}, "/api/v1/mesh?test=ping&path=pod-pod", fmt.Sprintf("more than %d", MaxMeshResults)},
		{"probe period too large", Config{Source: meshSource([]string{"a", "b"}, ""), Probes: probes}, "/api/v1/mesh", fmt.Sprintf("more than %d nodes", MaxMeshNodes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp := serve(t, u, tc.path)
			b := body(t, resp)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, tc.want) {
				t.Fatalf("GET %s: %d %s, want 422 with %q", tc.path, resp.StatusCode, b, tc.want)
			}
		})
	}
	if len(asked) != 1 || asked[0] != MaxMeshNodes*(MaxMeshNodes-1) {
		t.Errorf("probe samples asked with limits %v, want one read bounded at %d", asked, MaxMeshNodes*(MaxMeshNodes-1))
	}
}

// TestHosts: with Config.Hosts, a request naming another host (a DNS
// rebinding to loopback) is refused 421; the listed ones, in any case,
// and IP addresses are served.
func TestHosts(t *testing.T) {
	u, err := New(Config{Source: meshSource([]string{"a", "b"}, ""), Hosts: []string{"127.0.0.1", "::1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:7780", http.StatusOK},
		{"[::1]:7780", http.StatusOK},
		{"localhost", http.StatusOK},
		{"LOCALHOST:7780", http.StatusOK},
		{"10.9.8.7:7780", http.StatusOK}, // an IP address cannot be rebound
		{"evil.example:7780", http.StatusMisdirectedRequest},
		{"127.0.0.1.evil.example", http.StatusMisdirectedRequest},
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/agents", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		u.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Host %q: %d, want %d", tc.host, rec.Code, tc.want)
		}
	}
}
