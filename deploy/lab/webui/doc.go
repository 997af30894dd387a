// Package webui holds the real-browser tests of the coordinator's web UI
// (coordinator/web): Debian's chromium, headless, driven with chromedp
// against a coordinator that serves the UI (serve --web-listen). It has no
// code outside its tests.
//
// TestWebUILab builds a 3-node lab (deploy/lab), runs the coordinator and
// an agent per node in it (deploy/lab/cluster) under continuous monitoring
// (light runs of ping and qperf tcp_lat every 10 s, probes every second)
// with one triggered run, and reaches the UI, which listens inside the
// control-plane node's host namespace, only through a loopback forward
// (deploy/lab/forward). Every page must load and render
// (body[data-ready="1"]) without a console error, an uncaught exception
// or a request off 127.0.0.1; the mesh must show one cell per ordered
// node pair, all ok (a "degraded" on a microsecond RTT is logged and
// tolerated: veth noise under the UI's ratio rule), then, once the next
// continuous run after a pod-network fault on one node ended, that
// node's row and column failing, no other cell failing, and a finding on
// that node; the pair page must draw one point per bucket of stored
// samples (MeshService.ListProbeSeries); Tab must reach every control
// with a visible focus, and the arrow keys and Enter work in the mesh. Screenshots of every page go to the test's artifact directory
// (go test -artifacts keeps them); with MESHPERF_UPDATE_SCREENSHOTS=1 two
// of them are copied to docs/screenshots for the README.
//
// BenchmarkMeshPaint300 loads the mesh page of a coordinator on loopback
// that holds the probe reports of 300 simulated agents (deploy/fleet) and
// prints the time from navigation to the first full paint.
//
// Chromium runs with --headless --no-sandbox --disable-gpu --disable-quic
// --no-first-run --disable-background-networking
// --disable-component-update --disable-sync and a fresh user data
// directory, in a process group of its own that is killed when the test
// ends, and is only ever pointed at 127.0.0.1.
package webui
