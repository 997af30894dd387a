package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/testutil"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// updateScreenshotsEnv, set to 1, makes TestWebUILab copy the mesh (with
// the fault) and pair screenshots to docs/screenshots for the README.
const updateScreenshotsEnv = "MESHPERF_UPDATE_SCREENSHOTS"

// page is one page of the UI and what it must show.
type page struct {
	name, path string
	// check looks at the rendered page; nil means only the common checks.
	check func(t *testing.T, tt *tab)
	// mesh: the page holds the mesh (one tab stop, arrow keys).
	mesh bool
}

// TestWebUILab drives chromium against the UI of a coordinator holding
// a 3-node lab's results (a triggered run, then the continuous light
// runs, the first with a fault after it): every page renders without a console error
// and Tab reaches each of its controls; the mesh has one cell per
// ordered pair, all ok, and after a pod-network fault on one node its
// row and column fail (and only they) with a finding on it; the pair
// page draws a point per stored sample bucket. Screenshots go to the
// artifact directory.
func TestWebUILab(t *testing.T) {
	requireBrowserLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	t0 := time.Now()
	e := startLab(t, ctx)
	nodes := e.nodes()
	t.Logf("lab and meshperf up in %.1fs; UI at %s", time.Since(t0).Seconds(), e.base)
	clean := e.trigger(ctx, t, "clean", 2*time.Minute)
	t.Logf("clean run %s ended after %.1fs", clean, time.Since(t0).Seconds())
	shots := t.ArtifactDir()
	t.Logf("screenshots in %s", shots)
	b := startBrowser(t, 5*time.Minute)
	src, dst, victim := nodes[0], nodes[1], nodes[len(nodes)-1]
	var pairShot string

	pages := []page{
		{name: "mesh", path: "/mesh?test=ping&path=pod-pod", mesh: true, check: func(t *testing.T, tt *tab) {
			var noise []string
			m, bad := waitMesh(tt, 20*time.Second, func(m *meshDOM) []string {
				var states []string
				states, noise = faultStates(m, "")
				return append(checkMeshShape(m, nodes), states...)
			})
			for _, s := range bad {
				t.Error(s)
			}
			for _, s := range noise {
				t.Logf("tolerated: %s", s)
			}
			if m != nil && len(m.Findings) > 0 {
				t.Errorf("findings %v on a clean lab, want none", m.Findings)
			}
		}},
		{name: "probes", path: "/mesh", mesh: true, check: func(t *testing.T, tt *tab) {
			m, bad := waitMesh(tt, 20*time.Second, func(m *meshDOM) []string {
				states, noise := faultStates(m, "")
				for _, s := range noise {
					t.Logf("tolerated: %s", s)
				}
				return append(append(checkMeshShape(m, nodes), states...), probeView(tt)...)
			})
			for _, s := range bad {
				t.Error(s)
			}
			if m != nil && len(m.Findings) > 0 {
				t.Errorf("findings %v on a clean lab, want none", m.Findings)
			}
		}},
		{name: "pair", path: fmt.Sprintf("/pair?src=%s&dst=%s&range=1h", src, dst), check: func(t *testing.T, tt *tab) {
			var bad []string
			for try := range 3 { // the page re-renders as reports come in
				p, err := readPair(tt)
				if err != nil {
					t.Fatal(err)
				}
				var points, samples int
				bad, points, samples = checkPairPoints(ctx, e.client, src, dst, p)
				if !p.Range {
					bad = append(bad, "no select#range (or range links)")
				}
				if p.OnDemand == 0 {
					bad = append(bad, fmt.Sprintf("#ondemand lists no result, want the clean run's %s -> %s results", src, dst))
				}
				if len(bad) == 0 {
					t.Logf("pair %s -> %s: %d points for %d stored samples (%s, step %d s), %d on-demand results (try %d)",
						src, dst, points, samples, p.API.Kind, p.API.StepSeconds, p.OnDemand, try+1)
					if points == 0 {
						t.Error("the chart has no point")
					}
					return
				}
				time.Sleep(time.Second)
			}
			for _, s := range bad {
				t.Error(s)
			}
		}},
		{name: "runs", path: "/runs", check: func(t *testing.T, tt *tab) {
			ids, err := evalJS[[]string](tt, `[...document.querySelectorAll("table#runs tr[data-run]")].map(r => r.dataset.run)`)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(ids, clean) {
				t.Errorf("table#runs rows %v, want the clean run %s", ids, clean)
			}
			runs, err := e.client.ListRuns(ctx, &meshv1.ListRunsRequest{PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs.GetRuns() {
				if testspec.RunEnded(r.GetState()) && r.GetEndTime().AsTime().Before(time.Now().Add(-15*time.Second)) && !slices.Contains(ids, r.GetRunId()) {
					t.Errorf("run %s (%s) not in table#runs", r.GetRunId(), r.GetSpec().GetLabel())
				}
			}
		}},
		{name: "run", path: "/runs/" + clean, check: func(t *testing.T, tt *tab) {
			run, err := e.client.GetRun(ctx, &meshv1.GetRunRequest{RunId: clean})
			if err != nil {
				t.Fatal(err)
			}
			progress, err := evalJS[string](tt, `(document.getElementById("progress") || {}).textContent || ""`)
			if err != nil {
				t.Fatal(err)
			}
			done := fmt.Sprintf("%d/%d", run.GetRun().GetTestsDone(), run.GetRun().GetTestsPlanned())
			if !strings.Contains(strings.ReplaceAll(progress, " ", ""), done) {
				t.Errorf("#progress %q, want done/total %s", progress, done)
			}
			report, err := evalJS[string](tt, `(document.getElementById("report") || {}).textContent || ""`)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				if !strings.Contains(report, n) {
					t.Errorf("#report does not name node %s: %.200q", n, report)
				}
			}
		}},
		{name: "agents", path: "/agents", check: func(t *testing.T, tt *tab) {
			raw, err := evalJS[[]byte](tt, `Object.fromEntries([...document.querySelectorAll("table#agents tr[data-node]")].map(r => [r.dataset.node, r.dataset.state || ""]))`)
			if err != nil {
				t.Fatal(err)
			}
			var states map[string]string
			if err := json.Unmarshal(raw, &states); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				if states[n] != "connected" {
					t.Errorf("table#agents: %s is %q, want connected (rows %v)", n, states[n], states)
				}
			}
			if len(states) != len(nodes) {
				t.Errorf("table#agents rows %v, want the %d lab nodes", states, len(nodes))
			}
		}},
	}
	visit := func(t *testing.T, p page, shot string) *tab {
		tt := b.newTab(t, 90*time.Second)
		took, err := tt.load(e.base+p.path, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rendered in %v", p.path, took.Round(time.Millisecond))
		if p.check != nil {
			p.check(t, tt)
		}
		if path, err := tt.screenshot(shots, shot); err != nil {
			t.Error(err)
		} else {
			t.Logf("screenshot %s", path)
		}
		return tt
	}
	noProblems := func(t *testing.T, tt *tab) {
		t.Helper()
		for _, p := range tt.takeProblems() {
			t.Errorf("browser: %s", p)
		}
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			tt := visit(t, p, p.name)
			noProblems(t, tt)
			if p.name == "pair" {
				pairShot = filepath.Join(shots, "pair-viewport.png")
				if err := tt.viewportShot(pairShot); err != nil {
					t.Error(err)
				}
			}
			t.Run("keyboard", func(t *testing.T) {
				if _, err := tt.load(e.base+p.path, 30*time.Second); err != nil {
					t.Fatal(err)
				}
				checkKeyboard(t, tt, p.mesh)
				if p.mesh {
					meshArrows(t, tt)
				}
				noProblems(t, tt)
			})
		})
	}
	if t.Failed() {
		return // the fault's checks need a clean mesh first
	}

	// The fault: node victim's pod network drops every cross-node packet.
	tf := time.Now()
	if err := lab.Inject(ctx, e.lab, lab.Fault{Kind: lab.FaultPodDrop, Node: victim}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = lab.Clear(context.Background(), e.lab, victim, lab.FaultPodDrop) })
	// The next continuous run is the lab's run with the fault.
	run, err := e.monitorRunAfter(ctx, tf, 2*monitorInterval+90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	faulty := run.GetRunId()
	t.Logf("continuous run %s (%d tests, %d failed) ended %.1fs after the fault, %.1fs after its start", faulty, run.GetTestsPlanned(), run.GetTestsFailed(),
		time.Since(tf).Seconds(), run.GetEndTime().AsTime().Sub(run.GetCreateTime().AsTime()).Seconds())

	faultPages := []page{
		{name: "mesh-fault", path: "/mesh?test=ping&path=pod-pod", mesh: true, check: func(t *testing.T, tt *tab) {
			m, bad := waitMesh(tt, 30*time.Second, func(m *meshDOM) []string {
				states, noise := faultStates(m, victim)
				for _, s := range noise {
					t.Logf("tolerated: %s", s)
				}
				bad := append(checkMeshShape(m, nodes), states...)
				if !slices.ContainsFunc(m.Findings, func(f meshFinding) bool { return f.Node == victim }) {
					bad = append(bad, fmt.Sprintf("#findings %v has no li[data-node=%s]", m.Findings, victim))
				}
				return bad
			})
			for _, s := range bad {
				t.Error(s)
			}
			if m != nil {
				t.Logf("findings %v", m.Findings)
			}
		}},
		{name: "probes-fault", path: "/mesh", mesh: true, check: func(t *testing.T, tt *tab) {
			m, bad := waitMesh(tt, 30*time.Second, func(m *meshDOM) []string {
				states, noise := faultStates(m, victim)
				for _, s := range noise {
					t.Logf("tolerated: %s", s)
				}
				bad := append(append(checkMeshShape(m, nodes), states...), probeView(tt)...)
				if !slices.ContainsFunc(m.Findings, func(f meshFinding) bool { return f.Node == victim }) {
					bad = append(bad, fmt.Sprintf("#findings %v has no li[data-node=%s]", m.Findings, victim))
				}
				return bad
			})
			for _, s := range bad {
				t.Error(s)
			}
			if m != nil {
				t.Logf("probe findings %v", m.Findings)
			}
		}},
		{name: "compare", path: fmt.Sprintf("/compare?a=%s&b=%s", clean, faulty), check: func(t *testing.T, tt *tab) {
			text, err := evalJS[string](tt, `(document.getElementById("compare") || {}).textContent || ""`)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(text) == "" {
				t.Error("#compare is empty")
			}
		}},
		{name: "run-fault", path: "/runs/" + faulty},
	}
	for _, p := range faultPages {
		t.Run(p.name, func(t *testing.T) {
			tt := visit(t, p, p.name)
			noProblems(t, tt)
			if p.name == "probes-fault" && os.Getenv(updateScreenshotsEnv) == "1" {
				updateDocs(t, tt, pairShot)
			}
		})
	}
}

// updateDocs writes the mesh page's viewport (with the fault) and the
// pair page's to docs/screenshots/{mesh,pair}.png in the module.
func updateDocs(t *testing.T, meshTab *tab, pairShot string) {
	t.Helper()
	dir := filepath.Join(testutil.ModuleRoot(t), "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := meshTab.viewportShot(filepath.Join(dir, "mesh.png")); err != nil {
		t.Error(err)
	}
	png, err := os.ReadFile(pairShot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pair.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("updated %s/{mesh,pair}.png", dir)
}

// probeView checks that the mesh on screen is the continuous probes'
// (the default view: select#test on probe_icmp, pod-pod), not a run's.
func probeView(tt *tab) []string {
	got, err := evalJS[string](tt, `((document.getElementById("test") || {}).value || "") + " " + ((document.getElementById("path") || {}).value || "")`)
	if err != nil {
		return []string{err.Error()}
	}
	if got != "probe_icmp pod-pod" {
		return []string{fmt.Sprintf("default mesh shows %q, want the probes' %q", got, "probe_icmp pod-pod")}
	}
	return nil
}
