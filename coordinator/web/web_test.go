package web

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// serve answers one GET of path from u.
func serve(t testing.TB, u http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Result()
}

func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newUI(t testing.TB, src Source) *UI {
	t.Helper()
	u, err := New(Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPagesAndAssets: every route of the contract answers with its
// content type and the security headers: a strict CSP without inline
// script, nosniff, no framing.
func TestPagesAndAssets(t *testing.T) {
	u := newUI(t, meshSource([]string{"a", "b", "c"}, ""))
	tests := []struct {
		path, contentType string
		code              int
	}{
		{"/mesh", "text/html; charset=utf-8", 200},
		{"/mesh?test=ping&path=pod-pod", "text/html; charset=utf-8", 200},
		{"/pair?src=a&dst=b&range=7d", "text/html; charset=utf-8", 200},
		{"/runs", "text/html; charset=utf-8", 200},
		{"/runs/run-1", "text/html; charset=utf-8", 200},
		{"/compare?a=run-1&b=run-1", "text/html; charset=utf-8", 200},
		{"/agents", "text/html; charset=utf-8", 200},
		{"/assets/app.js", "text/javascript; charset=utf-8", 200},
		{"/assets/mesh.js", "text/javascript; charset=utf-8", 200},
		{"/assets/style.css", "text/css; charset=utf-8", 200},
		{"/healthz", "text/plain; charset=utf-8", 200},
		{"/api/v1/mesh", "application/json", 200},
		{"/api/v1/agents", "application/json", 200},
		{"/api/v1/runs", "application/json", 200},
		{"/api/v1/runs/run-1", "application/json", 200},
		{"/api/v1/compare?a=run-1&b=run-1", "application/json", 200},
		{"/api/v1/findings", "application/json", 200},
		{"/api/v1/pair?src=a&dst=b", "application/json", 200},
		{"/assets/missing.js", "", 404},
		{"/assets/index.go", "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := serve(t, u, tt.path)
			b := body(t, resp)
			if resp.StatusCode != tt.code {
				t.Fatalf("GET %s: %d %s, want %d", tt.path, resp.StatusCode, b, tt.code)
			}
			h := resp.Header
			if tt.contentType != "" && h.Get("Content-Type") != tt.contentType {
				t.Errorf("GET %s: Content-Type %q, want %q", tt.path, h.Get("Content-Type"), tt.contentType)
			}
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("GET %s: CSP %q lacks %q", tt.path, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("GET %s: CSP %q allows inline script or eval", tt.path, csp)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", tt.path, h.Get("X-Content-Type-Options"))
			}
		})
	}
	if resp := serve(t, u, "/"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/mesh" {
		t.Errorf("GET /: %d to %q, want a redirect to /mesh", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// svgNS is the one URL the assets may hold: the SVG namespace, a name
// that nothing fetches.
const svgNS = "http://www.w3.org/2000/svg"

// TestAssetsSelfContained: no embedded asset names a URL of another host
// (nothing is fetched from a CDN), none puts text into the page as HTML
// (innerHTML and its kin, document.write, eval), and the HTML shell has
// no inline script, style or event handler.
func TestAssetsSelfContained(t *testing.T) {
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|\.html\(|srcdoc`)
	inline := regexp.MustCompile(`(?i)<script>|<script[^>]*>[^<]+</script>|<style|\son[a-z]+=|\sstyle=|javascript:`)
	n := 0
	err := fs.WalkDir(Assets, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(Assets, name)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(b), svgNS, "")
		if m := url.FindString(text); m != "" {
			t.Errorf("%s names the URL %q: assets must not fetch from elsewhere", name, m)
		}
		if m := sinks.FindString(text); m != "" {
			t.Errorf("%s uses %s: data must go in as text (textContent, text nodes, attributes)", name, m)
		}
		if strings.HasSuffix(name, ".html") {
			if m := inline.FindString(text); m != "" {
				t.Errorf("%s holds %q: no inline script, style or handler under the CSP", name, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 {
		t.Errorf("%d assets embedded, want the shell, the JS modules and the CSS", n)
	}
}

// TestHostileNodeName: a node named like markup reaches the browser as
// JSON text with < and > escaped, decodes to the same name, and the JS
// that renders node names sets them as text.
func TestHostileNodeName(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>`
	u := newUI(t, meshSource([]string{"a", evil, "c"}, ""))
	for _, path := range []string{"/api/v1/mesh?test=ping&path=pod-pod", "/api/v1/agents", "/api/v1/runs/run-1"} {
		b := body(t, serve(t, u, path))
		if strings.Contains(b, "<img") {
			t.Errorf("GET %s: the raw markup is in the answer: %.200s", path, b)
		}
		if !strings.Contains(b, `\u003cimg src=x onerror=alert(1)\u003e`) {
			t.Errorf("GET %s: the escaped name is not in the answer: %.300s", path, b)
		}
	}
	var m struct{ Nodes []string }
	if err := json.Unmarshal([]byte(body(t, serve(t, u, "/api/v1/mesh"))), &m); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range m.Nodes {
		found = found || n == evil
	}
	if !found {
		t.Errorf("mesh nodes %q: want the name as it is", m.Nodes)
	}
	// The DOM helper appends strings as text nodes and sets attributes;
	// no renderer builds markup from strings.
	app, err := fs.ReadFile(Assets, "app.js")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(app), "document.createTextNode(String(c))") {
		t.Errorf("app.js el() does not add children as text nodes")
	}
}

// TestMeshAPI: the mesh API's node list and flat arrays for N nodes: the
// bad node first, its row and column failed, the others degraded or ok
// by their ratio to host-host, figures and baselines in seconds.
func TestMeshAPI(t *testing.T) {
	for _, n := range []int{3, 7, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var nodes []string
			for i := range n {
				nodes = append(nodes, fmt.Sprintf("node-%02d", i))
			}
			bad := nodes[n/2]
			u := newUI(t, meshSource(nodes, bad))
			resp := serve(t, u, "/api/v1/mesh?test=ping&path=pod-pod")
			var m struct {
				Test, Path, Baseline string
				Nodes                []string
				State                string
				Value, Base, Loss    []*float64
			}
			if err := json.Unmarshal([]byte(body(t, resp)), &m); err != nil {
				t.Fatal(err)
			}
			if m.Test != "ping" || m.Path != "pod-pod" || m.Baseline != "host-host" || len(m.Nodes) != n ||
				len(m.State) != n*n || len(m.Value) != n*n || len(m.Base) != n*n || len(m.Loss) != n*n {
				t.Fatalf("mesh %s %s vs %s: %d nodes, %d/%d/%d/%d entries; want %d nodes and %d entries each",
					m.Test, m.Path, m.Baseline, len(m.Nodes), len(m.State), len(m.Value), len(m.Base), len(m.Loss), n, n*n)
			}
			if m.Nodes[0] != bad {
				t.Errorf("nodes %v: want %s (bad) first", m.Nodes, bad)
			}
			if want := testutil.MeshStateFirstBad(n); m.State != want {
				t.Fatalf("state %q, want %q (the bad node's row and column failed)", m.State, want)
			}
			for at, s := range m.State {
				if s == 'o' && (m.Value[at] == nil || *m.Value[at] != 150e-6 || m.Base[at] == nil || *m.Base[at] != 100e-6) {
					t.Fatalf("%s -> %s: value %v base %v, want 0.00015 and 0.0001", m.Nodes[at/n], m.Nodes[at%n], m.Value[at], m.Base[at])
				}
			}
		})
	}
}

// TestMeshDegraded: a pod-pod figure more than DegradedRatio times its
// host-host baseline and more than DegradedFloorSeconds slower is
// degraded; at the ratio, or over it by less than the floor, ok.
func TestMeshDegraded(t *testing.T) {
	for _, tt := range []struct {
		rtt  float64
		want byte
	}{{199e-6, 'o'}, {250e-6, 'o'}, {299e-6, 'o'}, {301e-6, 'd'}, {2e-3, 'd'}} {
		src := meshSource([]string{"a", "b"}, "")
		for _, r := range src.results["run-1"] {
			if r.GetPath() == measurev1.Path_PATH_POD_TO_POD {
				v := tt.rtt
				r.GetPing().RttMedianSeconds = &v
			}
		}
		var m struct{ State string }
		if err := json.Unmarshal([]byte(body(t, serve(t, newUI(t, src), "/api/v1/mesh?test=ping&path=pod-pod"))), &m); err != nil {
			t.Fatal(err)
		}
		if m.State != "s"+string(tt.want)+string(tt.want)+"s" {
			t.Errorf("pod-pod RTT %v s against 100 µs host-host: states %q, want %c off the diagonal", tt.rtt, m.State, tt.want)
		}
	}
}

// TestMeshPicksContinuousRun: the mesh shows the newest ended run of the
// monitor (label monitor-*) that measured the test and path, not a newer
// on-demand run nor one in progress; the choices list what the runs
// measured.
func TestMeshPicksContinuousRun(t *testing.T) {
	src := meshSource([]string{"a", "b", "c"}, "")
	cont := src.runs[0]
	onDemand := &measurev1.Run{RunId: "run-2", State: measurev1.RunState_RUN_STATE_SUCCEEDED, Spec: &measurev1.RunSpec{Label: "tuning",
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}}}
	running := &measurev1.Run{RunId: "run-3", State: measurev1.RunState_RUN_STATE_RUNNING, Spec: &measurev1.RunSpec{Label: "monitor-light",
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}}}
	// A run of external targets only has no matrix: passed over.
	external := &measurev1.Run{RunId: "run-4", State: measurev1.RunState_RUN_STATE_SUCCEEDED, Spec: &measurev1.RunSpec{Label: "monitor-external",
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL}}}
	src.runs = []*measurev1.Run{external, running, onDemand, cont} // newest first
	var m struct {
		RunID        string `json:"run_id"`
		Test, Path   string
		Tests, Paths []string
	}
	if err := json.Unmarshal([]byte(body(t, serve(t, newUI(t, src), "/api/v1/mesh"))), &m); err != nil {
		t.Fatal(err)
	}
	if m.RunID != cont.GetRunId() || m.Test != "ping" || m.Path != "pod-pod" {
		t.Errorf("mesh of run %q, %s %s; want the continuous run %s, ping pod-pod by default", m.RunID, m.Test, m.Path, cont.GetRunId())
	}
	if strings.Join(m.Tests, ",") != "ping" || strings.Join(m.Paths, ",") != "host-host,pod-pod" {
		t.Errorf("choices %v %v, want ping and host-host, pod-pod", m.Tests, m.Paths)
	}
}

// The nodes of a run's matrix are those of its cells between nodes: a
// node that measured only external targets is not one (a run of targets
// only, from thousands of nodes, is no matrix too large to show).
func TestRunDataCountsMeshNodes(t *testing.T) {
	results := []*measurev1.Result{pingResult("r", "a", "b", measurev1.Path_PATH_HOST_TO_HOST, 1e-3)}
	for _, src := range []string{"c", "d", "e"} {
		results = append(results, pingResult("r", src, "dns", measurev1.Path_PATH_HOST_TO_EXTERNAL, 2e-3))
	}
	if d := buildRunData(&measurev1.Run{RunId: "r"}, results); d.nodes != 2 {
		t.Errorf("run data of 1 node pair and 3 sources of external tests: %d nodes, want 2", d.nodes)
	}
}
