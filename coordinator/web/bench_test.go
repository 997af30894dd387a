package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkMeshAPI300 is GET /api/v1/mesh for a 300-node continuous ping
// run on host-host and pod-pod (179,400 results): "cold" reads and
// computes the run (its cells, losses and diagnose's findings) as the
// first call after a run ends does; "cached" is every poll after it. It
// reports the answer's size in bytes.
func BenchmarkMeshAPI300(b *testing.B) {
	var nodes []string
	for i := range 300 {
		nodes = append(nodes, fmt.Sprintf("node-%03d", i))
	}
	src := meshSource(nodes, "node-150")
	for _, mode := range []string{"cold", "cached"} {
		b.Run(mode, func(b *testing.B) {
			u := newUI(b, src)
			if mode == "cached" {
				serve(b, u, "/api/v1/mesh?test=ping&path=pod-pod")
			}
			size := 0
			b.ResetTimer()
			for b.Loop() {
				if mode == "cold" {
					u.meshes = newMeshCache(8)
				}
				rec := httptest.NewRecorder()
				u.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/mesh?test=ping&path=pod-pod", nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body.String())
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/answer")
		})
	}
}

// BenchmarkProbeMesh5000 is GET /api/v1/mesh, rebuilt, for the continuous
// probes of 5,000 nodes that each probe 50 peers (subset_size 50: 250,000
// pairs), drawn as the worstShown nodes with the most bad pairs. It
// reports the answer's size in bytes.
func BenchmarkProbeMesh5000(b *testing.B) {
	peers := make([]int, 50)
	for i := range peers {
		peers[i] = 1 + i*97
	}
	u, err := New(Config{Source: meshSource([]string{"a", "b"}, ""), Probes: subsetProbes(5000, peers, "node-2500")})
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for b.Loop() {
		u.probes.mu.Lock()
		u.probes.views = nil
		u.probes.mu.Unlock()
		rec := httptest.NewRecorder()
		u.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/mesh", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/answer")
}
