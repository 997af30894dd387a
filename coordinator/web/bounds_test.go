package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestMeshBounds: a run with more tests than MaxMeshResults, the report
// and compare of a run of more than MaxMeshNodes nodes (a ring: few
// tests, a huge matrix) and a probe period of more than MaxMeshNodes
// nodes are answered 422 naming the bound, and nothing is read past it.
func TestMeshBounds(t *testing.T) {
	var asked []int
	probes := &Probes{Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Latest: func(_ context.Context, _ measurev1.Path, _ measurev1.ProbeKind, _ time.Time, limit int) ([]store.LatestSample, error) {
			asked = append(asked, limit)
			return nil, fmt.Errorf("%w: more than %d samples", store.ErrLimit, limit)
		}}
	huge := meshSource([]string{"a", "b"}, "")
	huge.runs[0].TestsPlanned = MaxMeshResults + 1
	// A ring of MaxMeshNodes+1 nodes: few results, too many nodes to draw.
	ring := meshSource([]string{"a", "b"}, "")
	ring.results["run-1"] = nil
	for i := range MaxMeshNodes + 1 {
		src, dst := fmt.Sprintf("node-%04d", i), fmt.Sprintf("node-%04d", (i+1)%(MaxMeshNodes+1))
		ring.results["run-1"] = append(ring.results["run-1"], pingResult("run-1", src, dst, measurev1.Path_PATH_POD_TO_POD, 150e-6))
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		path string
		want string
	}{
		{"run too large", Config{Source: huge}, "/api/v1/mesh?test=ping&path=pod-pod", fmt.Sprintf("more than %d", MaxMeshResults)},
		// Its mesh shows its worst nodes: TestRunMeshOfManyNodes.
		{"run of too many nodes: its compare", Config{Source: ring}, "/api/v1/compare?a=run-1&b=run-1", fmt.Sprintf("has %d nodes, more than %d", MaxMeshNodes+1, MaxMeshNodes)},
		{"run of too many nodes: its report", Config{Source: ring}, "/api/v1/runs/run-1", fmt.Sprintf("has %d nodes, more than %d", MaxMeshNodes+1, MaxMeshNodes)},
		{"probe period too large", Config{Source: meshSource([]string{"a", "b"}, ""), Probes: probes}, "/api/v1/mesh", fmt.Sprintf("more than %d pairs", MaxMeshNodes*(MaxMeshNodes-1))},
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

// timedSource is a fakeSource whose ListResults answers one pair's
// results in time order: the monitor's every every (a minute if zero;
// the on-demand run's with busyOnDemand), unless the request asks for the
// clients' runs alone (origin), and an on-demand run's at onDemandAt,
// within the request's [start_time, end_time); it counts the results it
// returned.
type timedSource struct {
	*fakeSource
	onDemandAt   []time.Time
	every        time.Duration
	busyOnDemand bool
	returned     int
}

func (s *timedSource) ListResults(_ context.Context, req *meshv1.ListResultsRequest) (*meshv1.ListResultsResponse, error) {
	from, to := req.GetStartTime().AsTime(), req.GetEndTime().AsTime()
	every := s.every
	if every == 0 {
		every = time.Minute
	}
	var all []*measurev1.Result
	for t := from.Truncate(every); t.Before(to); t = t.Add(every) {
		switch {
		case t.Before(from):
		case s.busyOnDemand:
			all = append(all, &measurev1.Result{RunId: "run-od", StartTime: timestamppb.New(t), Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}})
		case req.GetOrigin() != measurev1.RunOrigin_RUN_ORIGIN_CLIENT:
			all = append(all, &measurev1.Result{RunId: "run-mon", StartTime: timestamppb.New(t), Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}})
		}
		for _, od := range s.onDemandAt {
			if !od.Before(t) && od.Before(t.Add(every)) && !od.Before(from) && od.Before(to) {
				all = append(all, &measurev1.Result{RunId: "run-od", StartTime: timestamppb.New(od), Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}})
			}
		}
	}
	next := 0
	if req.GetPageToken() != "" {
		next, _ = strconv.Atoi(req.GetPageToken())
	}
	stop := min(len(all), next+int(req.GetPageSize()))
	tok := ""
	if stop < len(all) {
		tok = strconv.Itoa(stop)
	}
	s.returned += stop - next
	return &meshv1.ListResultsResponse{Results: all[next:stop], NextPageToken: tok}, nil
}

// TestOnDemandBounded: the pair page's on-demand list over 30 days of a
// pair the monitor measured every minute (43,200 results) asks for the
// clients' runs alone (the store skips the monitor's), reads from the end
// of the range, slice by slice, and stops once it found its results or
// read maxOnDemandRead: the newest on-demand results are found, and none
// of the monitor's.
func TestOnDemandBounded(t *testing.T) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	start := end.Add(-30 * 24 * time.Hour)
	runs := []*measurev1.Run{{RunId: "run-mon", Spec: &measurev1.RunSpec{Label: "monitor-light"}}, {RunId: "run-od", Spec: &measurev1.RunSpec{Label: "by-hand"}}}
	for _, tc := range []struct {
		name      string
		every     time.Duration // the monitor's results
		busy      bool          // the periodic results are the on-demand run's
		at        []time.Time
		want      int
		maxReturn int
	}{
		{"two on-demand results 2 days back", time.Minute, false, []time.Time{end.Add(-49 * time.Hour), end.Add(-50 * time.Hour)}, 2, maxOnDemandRead},
		// The monitor's results are never listed: the request asks for the
		// clients' runs (without origin, the source answers them too).
		{"none: not one of the monitor's", time.Minute, false, nil, 0, maxOnDemandRead},
		{"dense monitor: the one on-demand 30 min back", 2 * time.Second, false, []time.Time{end.Add(-30 * time.Minute)}, 1, maxOnDemandRead},
		// 43,200 on-demand results in the newest day's slice alone: it is
		// halved until readable, never read from its oldest end.
		{"dense on-demand: the newest", 2 * time.Second, true, []time.Time{end.Add(-time.Second)}, maxOnDemand, maxOnDemandRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &timedSource{fakeSource: &fakeSource{runs: runs}, onDemandAt: tc.at, every: tc.every, busyOnDemand: tc.busy}
			u, err := New(Config{Source: src})
			if err != nil {
				t.Fatal(err)
			}
			got, err := u.onDemand(t.Context(), "node-1", "node-2", start, end)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want || src.returned > tc.maxReturn {
				t.Errorf("%d on-demand results after reading %d; want %d, reading at most %d (of 43,200)", len(got), src.returned, tc.want, tc.maxReturn)
			}
			if len(got) > 0 && got[0].Time != tc.at[0].Format(time.RFC3339) {
				t.Errorf("first %v, want the newest first", got[0])
			}
		})
	}
}

// TestProbeFreshness: the probe mesh takes a node's newest period if it
// ended within three report intervals plus 5 s, and never less than 30 s
// (the lab's 2 s reports would otherwise drop a node slowed down for 11 s).
func TestProbeFreshness(t *testing.T) {
	for ri, want := range map[time.Duration]time.Duration{2 * time.Second: 30 * time.Second, 10 * time.Second: 35 * time.Second, time.Minute: 185 * time.Second} {
		if got := ProbeFreshness(ri); got != want {
			t.Errorf("ProbeFreshness(%v) = %v, want %v", ri, got, want)
		}
	}
}

// subsetProbes are continuous probes (ICMP, host-host) of n nodes, each
// probing peers others (i+1, i+7, i+31, ... as with subset_size), every
// pair OK but those to and from bad, which lose every probe.
func subsetProbes(n int, peers []int, bad string) *Probes {
	return &Probes{Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Latest: func(_ context.Context, path measurev1.Path, kind measurev1.ProbeKind, _ time.Time, _ int) ([]store.LatestSample, error) {
			out := make([]store.LatestSample, 0, n*len(peers))
			for i := range n {
				for _, d := range peers {
					src, dst := fmt.Sprintf("node-%04d", i), fmt.Sprintf("node-%04d", (i+d)%n)
					s := series.Sample{Start: time.Now(), Period: time.Second, Sent: 10, Received: 10, RTTMedian: time.Millisecond, Status: measurev1.Status_STATUS_OK}
					if src == bad || dst == bad {
						s.Received, s.Status = 0, measurev1.Status_STATUS_TIMEOUT
					}
					out = append(out, store.LatestSample{Key: series.Key{Src: src, Dst: dst, Path: path, Kind: kind}, Sample: s})
				}
			}
			return out, nil
		}}
}

// TestProbeMeshOfManyNodes: a probe period of more than MaxMeshNodes
// nodes (each probing a few peers, as with subset_size) is drawn as the
// matrix of the worstShown nodes with the most bad pairs, the faulty one
// first, and says how many nodes the period has.
func TestProbeMeshOfManyNodes(t *testing.T) {
	const n, bad = 2000, "node-1234"
	u, err := New(Config{Source: meshSource([]string{"a", "b"}, ""), Probes: subsetProbes(n, []int{1, 7, 31}, bad)})
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(t, u, "/api/v1/mesh")
	var m struct {
		Nodes      []string `json:"nodes"`
		TotalNodes int      `json:"total_nodes"`
		State      string   `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/mesh: %d, %v", resp.StatusCode, err)
	}
	if len(m.Nodes) != worstShown || m.TotalNodes != n || len(m.State) != worstShown*worstShown {
		t.Fatalf("%d nodes shown of %d, %d cells; want %d of %d", len(m.Nodes), m.TotalNodes, len(m.State), worstShown, n)
	}
	if m.Nodes[0] != bad {
		t.Errorf("first node %s, want the faulty %s", m.Nodes[0], bad)
	}
}

// TestRunMeshOfManyNodes: a run of more than MaxMeshNodes nodes (a few
// rounds of the mesh of a large fleet, each node in a few pairs) is drawn
// as the matrix of the worstShown nodes with the most bad pairs, the
// faulty one first, and says how many nodes the run has, rather than
// refused.
func TestRunMeshOfManyNodes(t *testing.T) {
	const n, bad = 2000, "node-1234"
	src := meshSource(nil, "")
	runID := src.runs[0].GetRunId()
	var results []*measurev1.Result
	name := func(i int) string { return fmt.Sprintf("node-%d", i%n) }
	for i := range n {
		for _, step := range []int{1, 7} { // two rounds' worth: every node in 4 pairs
			results = append(results, pairResults(runID, name(i), name(i+step), bad)...)
		}
	}
	src.results[runID] = results
	u, err := New(Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(t, u, "/api/v1/mesh?test=ping&path=pod-pod")
	var m struct {
		RunID      string   `json:"run_id"`
		Nodes      []string `json:"nodes"`
		TotalNodes int      `json:"total_nodes"`
		State      string   `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/mesh: %d, %v", resp.StatusCode, err)
	}
	if m.RunID != runID || len(m.Nodes) != worstShown || m.TotalNodes != n || len(m.State) != worstShown*worstShown {
		t.Fatalf("run %q: %d nodes shown of %d, %d cells; want run %q, %d of %d", m.RunID, len(m.Nodes), m.TotalNodes, len(m.State), runID, worstShown, n)
	}
	if m.Nodes[0] != bad {
		t.Errorf("first node %s, want the faulty %s", m.Nodes[0], bad)
	}
}
