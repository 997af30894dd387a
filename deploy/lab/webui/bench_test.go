package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/meshperf/meshperf/deploy/fleet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/labtest"
)

// benchNodes is the simulated fleet's size of BenchmarkMeshPaint300.
const benchNodes = 300

// paintProbeJS runs in every new document before the page's scripts: it
// records, on performance.now()'s clock (from the navigation's start),
// when body[data-ready="1"] is first set and the end of the frame after
// it (the first full paint).
const paintProbeJS = `new MutationObserver((ms, o) => {
  if (document.body && document.body.getAttribute("data-ready") === "1") {
    o.disconnect();
    window.__meshReady = performance.now();
    requestAnimationFrame(() => requestAnimationFrame(() => { window.__meshPaint = performance.now(); }));
  }
}).observe(document, {attributes: true, subtree: true, attributeFilter: ["data-ready"]});`

// paintFigures are one load's figures, in milliseconds from the
// navigation's start.
type paintFigures struct {
	Ready float64 `json:"ready"`
	Paint float64 `json:"paint"`
	FCP   float64 `json:"fcp"`
	// API is the /api/v1/mesh request's duration; APIBytes its body.
	API      float64 `json:"api"`
	APIBytes float64 `json:"apiBytes"`
	Cells    int     `json:"cells"`
	Nodes    int     `json:"nodes"`
}

const paintFiguresJS = `(() => {
  const fcp = performance.getEntriesByName("first-contentful-paint")[0];
  const api = performance.getEntriesByType("resource").filter(e => e.name.includes("/api/v1/mesh"))[0];
  return {
    ready: window.__meshReady || 0, paint: window.__meshPaint || 0, fcp: fcp ? fcp.startTime : 0,
    api: api ? api.duration : 0, apiBytes: api ? api.decodedBodySize : 0,
    cells: document.querySelectorAll("table#mesh td.cell").length,
    nodes: document.querySelectorAll("table#mesh tr[data-node]").length,
  };
})()`

// BenchmarkMeshPaint300 loads the mesh page of a coordinator on loopback
// (a real process with its bbolt store, the UI on 127.0.0.1) holding an
// ended ping mesh over 300 simulated agents (deploy/fleet: real gRPC
// sessions on loopback that answer each test at once), 89,700 results,
// and reports per load the time from the navigation's start to
// body[data-ready="1"] (ready_ms), to the frame after it (paint_ms: the
// first full paint), to the first contentful paint (fcp_ms), the mesh
// API request's duration and size, and the cells drawn. It asserts
// nothing about time. make bench-web runs it.
func BenchmarkMeshPaint300(b *testing.B) {
	requireChromium(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin := filepath.Join(labtest.Binaries(b), "coordinator")
	work := b.TempDir()
	conf := filepath.Join(work, "coordinator.yaml")
	// Probes far apart: the fleet holds plans and reports nothing; the
	// mesh comes from the on-demand run.
	if err := os.WriteFile(conf, []byte("probes:\n  interval: 60s\n  report_interval: 60s\n  kinds: [icmp]\n  paths: [host-host]\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = freeLoopback(b)
	}
	agentAddr, metricsAddr, webAddr := addrs[0], addrs[1], addrs[2]
	coord, err := fleet.StartCoordinator(ctx, bin, work, conf, agentAddr, metricsAddr, "--web-listen", webAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer coord.Stop()
	f, err := fleet.New(fleet.Config{Coordinator: agentAddr, Nodes: benchNodes})
	if err != nil {
		b.Fatal(err)
	}
	fctx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.Run(fctx) }()
	defer func() { stopFleet(); <-fleetDone }() //nolint:errcheck // waits for it to end: stopped here, its error is the stop's
	t0 := time.Now()
	regCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := testutil.PollContext(regCtx, 100*time.Millisecond, func() bool { return f.Snapshot().Registered == benchNodes }); err != nil {
		b.Fatalf("%d of %d simulated agents registered: %v", f.Snapshot().Registered, benchNodes, err)
	}
	b.Logf("%d simulated agents registered in %.1fs", benchNodes, time.Since(t0).Seconds())
	t1 := time.Now()
	run, err := fleet.MeshRun(ctx, filepath.Join(work, "coordinator.sock"), "bench-web", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("ping mesh %s: %d tests, %v, in %.1fs", run.GetRunId(), run.GetTestsPlanned(), run.GetState(), time.Since(t1).Seconds())

	br := startBrowser(b, 15*time.Minute)
	u := "http://" + webAddr + "/mesh?test=ping&path=host-host"
	// The first load is cold (the UI computes the mesh from the store);
	// the later ones find it computed.
	var cold paintFigures
	var warm []paintFigures
	for b.Loop() {
		fig := loadMesh(b, br, u)
		state := "warm"
		if len(warm) == 0 && cold.Paint == 0 {
			cold, state = fig, "cold"
		} else {
			warm = append(warm, fig)
		}
		fmt.Printf("mesh_paint load=%s nodes=%d cells=%d ready_ms=%.0f paint_ms=%.0f fcp_ms=%.0f api_ms=%.0f api_kb=%.0f\n",
			state, fig.Nodes, fig.Cells, fig.Ready, fig.Paint, fig.FCP, fig.API, fig.APIBytes/1024)
	}
	b.ReportMetric(cold.Paint, "cold_paint_ms")
	b.ReportMetric(cold.API, "cold_api_ms")
	if len(warm) > 0 {
		var paint, api float64
		for _, f := range warm {
			paint += f.Paint
			api += f.API
		}
		b.ReportMetric(paint/float64(len(warm)), "warm_paint_ms")
		b.ReportMetric(api/float64(len(warm)), "warm_api_ms")
	}
}

// loadMesh loads the mesh page at u in a new tab and returns its
// figures; every cell must be drawn, without a console error.
func loadMesh(b *testing.B, br *browser, u string) paintFigures {
	b.Helper()
	tt := br.newTab(b, 5*time.Minute)
	if _, err := chromedp.Call(tt.ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: paintProbeJS}); err != nil {
		b.Fatal(err)
	}
	if _, err := tt.load(u, 4*time.Minute); err != nil {
		b.Fatal(err)
	}
	if err := tt.waitJS("window.__meshPaint > 0", time.Minute); err != nil {
		b.Fatal(err)
	}
	raw, err := evalJS[[]byte](tt, paintFiguresJS)
	if err != nil {
		b.Fatal(err)
	}
	var fig paintFigures
	if err := json.Unmarshal(raw, &fig); err != nil {
		b.Fatal(err)
	}
	if fig.Cells != benchNodes*(benchNodes-1) {
		b.Errorf("%d cells drawn, want %d", fig.Cells, benchNodes*(benchNodes-1))
	}
	for _, p := range tt.takeProblems() {
		b.Errorf("browser: %s", p)
	}
	return fig
}

// freeLoopback is a 127.0.0.1 address with a port free now.
func freeLoopback(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
