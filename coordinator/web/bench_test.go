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
