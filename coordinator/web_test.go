package coordinator_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// webGet GETs url with the bearer token (none if empty) and returns the
// status and body.
func webGet(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testnet.Ctx(t, 20*time.Second), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// pingAnswer answers ping client work with an RTT of 100 µs, a timeout
// when the source or the target (by IP) is bad.
func pingAnswer(bad bool, badIP string) func(*agentv1.Work) *agentv1.WorkResult {
	return func(w *agentv1.Work) *agentv1.WorkResult {
		rc := w.GetRunClient()
		if rc == nil {
			return fakeagent.ServerAnswer(w)
		}
		r := absurdPing(100e-6)
		if bad || rc.GetTargetIp() == badIP {
			r = &measurev1.Result{Status: measurev1.Status_STATUS_TIMEOUT, Message: "no reply"}
		}
		r.Spec = rc.GetSpec()
		return fakeagent.ClientDone(w.GetWorkId(), r).GetWorkResult()
	}
}

// TestWebAPI: a coordinator with --web-listen, four fake agents over real
// gRPC (node-3 answers nothing: every ping from or to it times out), a
// ping run stored through the real run path and a probe report: the mesh
// API gives the node list once and flat n*n arrays with node-3 first
// and its row and column failed, the runs, run, compare, agents,
// findings and pair APIs give the run's figures, and bad parameters are
// 400 naming the parameter and its value.
func TestWebAPI(t *testing.T) {
	webAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	c := runAt(t, t.TempDir(), coordinator.Config{WebAddress: webAddr, Probes: &agentv1.ProbeSettings{
		Interval: durationpb.New(time.Second), ReportInterval: durationpb.New(10 * time.Second), Timeout: durationpb.New(500 * time.Millisecond),
		Kinds: []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}}, nil)
	ctx := testnet.Ctx(t, time.Minute)
	agentConn := dial(t, c.addr, insecureCreds())
	agents := map[string]*fakeagent.Agent{}
	for i, node := range []string{"node-1", "node-2", "node-3", "node-4"} {
		agents[node] = playAgent(t, ctx, agentConn, node, fmt.Sprintf("127.0.0.%d", i+1), pingAnswer(node == "node-3", "127.0.0.3"))
	}
	mesh := meshv1.NewMeshServiceClient(c.socketConn(t))
	if !testutil.Within(20*time.Second, 10*time.Millisecond, func() bool {
		resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
		return err == nil && len(resp.GetAgents()) == 4
	}) {
		t.Fatalf("agents did not register\n%s", c.logs)
	}
	trig, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, Label: "web-test"}})
	if err != nil {
		t.Fatal(err)
	}
	runID := trig.GetRun().GetRunId()
	if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool {
		resp, err := mesh.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
		s := resp.GetRun().GetState()
		return err == nil && s != measurev1.RunState_RUN_STATE_QUEUED && s != measurev1.RunState_RUN_STATE_RUNNING
	}) {
		t.Fatalf("run %s did not end\n%s", runID, c.logs)
	}
	// Two report periods of node-1's probes of node-2.
	now := time.Now().Truncate(10 * time.Second)
	for i, start := range []time.Time{now.Add(-30 * time.Second), now.Add(-20 * time.Second)} {
		err := agents["node-1"].Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: &agentv1.ProbeReport{
			Seq: uint64(i + 1), PeriodStart: timestamppb.New(start), Period: durationpb.New(10 * time.Second), PlanVersion: 1,
			Summaries: []*agentv1.ProbeSummary{{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"}, Path: measurev1.Path_PATH_HOST_TO_HOST,
				Kind: measurev1.ProbeKind_PROBE_KIND_ICMP, Sent: 10, Received: 9, RttMinSeconds: 1e-4, RttMedianSeconds: 2e-4, RttP90Seconds: 3e-4,
				RttMaxSeconds: 4e-4, Status: measurev1.Status_STATUS_TIMEOUT}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + webAddr
	get := func(path string, v any) {
		t.Helper()
		code, body := webGet(t, http.DefaultClient, base+path, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}

	var m struct {
		Test, Path  string
		RunID       string `json:"run_id"`
		Nodes       []string
		State       string
		Value, Loss []*float64
		Findings    []struct{ Node, Kind string }
	}
	get("/api/v1/mesh?test=ping&path=host-host", &m)
	n := len(m.Nodes)
	if m.Test != "ping" || m.Path != "host-host" || n != 4 || len(m.State) != n*n || len(m.Value) != n*n || len(m.Loss) != n*n {
		t.Fatalf("mesh: test %q path %q, %d nodes, %d states, %d values, %d losses; want ping host-host, 4 nodes and 16 of each",
			m.Test, m.Path, n, len(m.State), len(m.Value), len(m.Loss))
	}
	if m.RunID != runID {
		t.Errorf("mesh of run %q, want %s (the only ended run)", m.RunID, runID)
	}
	if m.Nodes[0] != "node-3" || strings.Join(m.Nodes[1:], ",") != "node-1,node-2,node-4" {
		t.Errorf("mesh nodes %v: want node-3 (the bad one) first, then by name", m.Nodes)
	}
	if want := testutil.MeshStateFirstBad(n); m.State != want {
		t.Errorf("mesh state %q, want %q (the bad node's row and column failed)", m.State, want)
	}
	for at, s := range m.State {
		if s == 'o' && (m.Value[at] == nil || *m.Value[at] != 100e-6 || m.Loss[at] == nil || *m.Loss[at] != 0) {
			t.Errorf("mesh %s -> %s: value %v loss %v, want 0.0001 s and 0", m.Nodes[at/n], m.Nodes[at%n], m.Value[at], m.Loss[at])
		}
	}
	found := false
	for _, f := range m.Findings {
		found = found || f.Node == "node-3"
	}
	if !found {
		t.Errorf("mesh findings %+v: want one about node-3", m.Findings)
	}

	// The default mesh is the continuous probes' newest period: node-1's
	// second report, node-1 -> node-2 degraded (a tenth lost), nothing
	// from node-2 yet.
	var pm struct {
		Test, Path, Label string
		Tests             []string
		Nodes             []string
		State             string
		Value, Loss       []*float64
	}
	if !testutil.Within(20*time.Second, 10*time.Millisecond, func() bool {
		pm.Nodes = nil
		get("/api/v1/mesh", &pm)
		return len(pm.Nodes) == 2
	}) {
		t.Fatalf("default mesh: %+v, want the probes' newest period over node-1 and node-2", pm)
	}
	if pm.Test != "probe_icmp" || pm.Path != "host-host" || pm.Label != "continuous probes" || len(pm.Tests) == 0 || pm.Tests[0] != "probe_icmp" {
		t.Errorf("default mesh: test %q path %q label %q tests %v; want probe_icmp host-host continuous probes, probe_icmp listed first", pm.Test, pm.Path, pm.Label, pm.Tests)
	}
	if strings.Join(pm.Nodes, ",") != "node-1,node-2" || pm.State != "sdns" {
		t.Errorf("probe mesh nodes %v states %q, want node-1,node-2 and sdns", pm.Nodes, pm.State)
	}
	if pm.Value[1] == nil || *pm.Value[1] != 2e-4 || pm.Loss[1] == nil || *pm.Loss[1] != 0.1 {
		t.Errorf("probe mesh node-1 -> node-2: value %v loss %v, want 0.0002 s and 0.1", pm.Value[1], pm.Loss[1])
	}
	var same struct{ Test, State string }
	get("/api/v1/mesh?test=probe_icmp&path=host-host", &same)
	if same.Test != "probe_icmp" || same.State != pm.State {
		t.Errorf("mesh?test=probe_icmp: %+v, want the default's %q", same, pm.State)
	}

	var runs struct {
		Runs []struct{ ID, Label, State string }
	}
	get("/api/v1/runs", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != runID || runs.Runs[0].Label != "web-test" {
		t.Errorf("runs %+v: want run %s labelled web-test", runs.Runs, runID)
	}
	var run struct {
		Run      struct{ ID, State string }
		Matrices []struct {
			Nodes []string
			Value []*float64
		}
	}
	get("/api/v1/runs/"+runID, &run)
	if run.Run.ID != runID || len(run.Matrices) != 1 || len(run.Matrices[0].Nodes) != 4 || len(run.Matrices[0].Value) != 16 {
		t.Errorf("run %+v: want one 4x4 matrix", run)
	}
	var cmp struct {
		Cells []struct{ Verdict string }
	}
	get("/api/v1/compare?a="+runID+"&b="+runID, &cmp)
	if len(cmp.Cells) != 12 {
		t.Errorf("compare: %d cells, want 12", len(cmp.Cells))
	}
	var ag struct {
		Agents []struct{ Node, State, Version string }
	}
	get("/api/v1/agents", &ag)
	if len(ag.Agents) != 4 || ag.Agents[0].Node != "node-1" || ag.Agents[0].State != "connected" {
		t.Errorf("agents %+v: want node-1..node-4 connected", ag.Agents)
	}
	var pair struct {
		Series []struct {
			Path string
			T    []int64
			Sent []uint64
			Loss []*float64
		}
	}
	if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool {
		get("/api/v1/pair?src=node-1&dst=node-2&range=1h", &pair)
		return len(pair.Series) == 1 && len(pair.Series[0].Sent) == 2
	}) {
		t.Fatalf("pair: %+v, want one host-host series of 2 points\n%s", pair, c.logs)
	}
	if s := pair.Series[0]; s.Path != "host-host" || s.Sent[0] != 10 || s.Loss[0] == nil || *s.Loss[0] != 0.1 {
		t.Errorf("pair series %+v: want host-host, 10 sent, loss 0.1", s)
	}

	bad := []struct{ path, param, value string }{
		{"/api/v1/mesh?test=bogus", "test", "bogus"},
		{"/api/v1/mesh?test=probe_tcp", "test", "probe_tcp"},
		{"/api/v1/mesh?test=probe_icmp&path=pod-pod", "path", "pod-pod"},
		{"/api/v1/mesh?path=nowhere", "path", "nowhere"},
		{"/api/v1/mesh?test=ping&test=ping", "test", "ping"},
		{"/api/v1/mesh?color=red", "color", "red"},
		{"/api/v1/pair?dst=node-2", "src", ""},
		{"/api/v1/pair?src=node-1&dst=node-2&range=2h", "range", "2h"},
		{"/api/v1/pair?src=node-1&dst=node-2&kind=udp", "kind", "udp"},
		{"/api/v1/compare?a=" + runID, "b", ""},
		{"/api/v1/runs?page_token=garbage", "page_token", ""},
	}
	for _, b := range bad {
		code, body := webGet(t, http.DefaultClient, base+b.path, "")
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error, b.param) || !strings.Contains(e.Error, b.value) {
			t.Errorf("GET %s: %d %s, want 400 naming %s and %q", b.path, code, body, b.param, b.value)
		}
	}
	if code, body := webGet(t, http.DefaultClient, base+"/api/v1/runs/no-such-run", ""); code != http.StatusNotFound {
		t.Errorf("GET a missing run: %d %s, want 404", code, body)
	}
}

// TestWebToken: with an API token, every /api/v1/ call needs it (401
// without it or with another), the pages and /healthz do not; a web
// address off loopback needs web TLS; with web TLS it speaks TLS 1.3.
func TestWebToken(t *testing.T) {
	pki := mtlstest.New(t)
	const token = "w3b-token"
	webAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	_, _, _ = start(t, coordinator.Config{
		TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File,
		APITokenFile: testutil.TokenFile(t, token), WebAddress: webAddr, WebTLSCertFile: pki.Server.Cert, WebTLSKeyFile: pki.Server.Key,
	})
	ca, err := os.ReadFile(pki.CA.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12}}}
	if _, err := client.Get("https://" + webAddr + "/healthz"); err == nil {
		t.Errorf("a TLS 1.2 client got an answer: want TLS 1.3 only")
	}
	client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + webAddr
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"no token", "/api/v1/agents", "", http.StatusUnauthorized},
		{"wrong token", "/api/v1/agents", "not-it", http.StatusUnauthorized},
		{"right token", "/api/v1/agents", token, http.StatusOK},
		{"mesh without token", "/api/v1/mesh", "", http.StatusUnauthorized},
		{"mesh with token", "/api/v1/mesh", token, http.StatusOK},
		{"unknown API path without token", "/api/v1/nothing", "", http.StatusUnauthorized},
		{"page without token", "/mesh", "", http.StatusOK},
		{"asset without token", "/assets/app.js", "", http.StatusOK},
		{"healthz without token", "/healthz", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := webGet(t, client, base+tt.path, tt.token)
			if code != tt.want {
				t.Errorf("GET %s: %d %s, want %d", tt.path, code, body, tt.want)
			}
			if tt.want == http.StatusUnauthorized && strings.Contains(body, token) {
				t.Errorf("the 401 answer shows the token: %s", body)
			}
		})
	}
}

// TestWebHosts: plaintext without a token, the web UI on every address
// (the shipped `--web-listen=:8080`, reached through `kubectl
// port-forward`) answers requests whose Host is an IP address, localhost
// or a name of --web-host (any case, a trailing dot), and refuses (421)
// any other: a page that DNS-rebinds its own name to the UI cannot read
// it. With a token (and TLS) any Host is answered. Every request goes to
// 127.0.0.1.
func TestWebHosts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tls, token bool
		hosts      map[string]int // Host header: status
	}{
		{"plaintext, no token", false, false, map[string]int{"127.0.0.1": 200, "localhost": 200, "LocalHost": 200, "[::1]": 200, "10.1.2.3": 200,
			"ui.example.com": 200, "UI.Example.com.": 200, "localhost.": 200, "rebind.attacker.example": 421, "localhost.attacker.example": 421}},
		{"TLS, no token", true, false, map[string]int{"127.0.0.1": 200, "rebind.attacker.example": 200}},
		{"TLS and token", true, true, map[string]int{"127.0.0.1": 200, "rebind.attacker.example": 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := testnet.FreePort(t)
			cfg := coordinator.Config{WebAddress: fmt.Sprintf(":%d", port), WebHosts: []string{"ui.example.com"}}
			token, client := "", http.DefaultClient
			scheme := "http"
			if tc.tls {
				pki := mtlstest.New(t)
				scheme = "https"
				ca, err := os.ReadFile(pki.CA.File)
				if err != nil {
					t.Fatal(err)
				}
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(ca)
				// The Host is not the certificate's name: verify against the
				// address dialled.
				client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
				cfg.WebTLSCertFile, cfg.WebTLSKeyFile = pki.Server.Cert, pki.Server.Key
				if tc.token {
					token = "t0ken"
					cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = pki.Server.Cert, pki.Server.Key, pki.CA.File
					cfg.APITokenFile = testutil.TokenFile(t, token)
				}
			}
			_, _, _ = start(t, cfg)
			for host, want := range tc.hosts {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d/api/v1/agents", scheme, port), nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = fmt.Sprintf("%s:%d", host, port)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("Host %s: %v", host, err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
				}
			}
		})
	}
}

// TestWebConfig: Run refuses, before it opens the store, a token on a web
// address off loopback without web TLS, half the web TLS files, and web
// TLS files without --web-listen; each error names the flag.
func TestWebConfig(t *testing.T) {
	pki := mtlstest.New(t)
	tok := testutil.TokenFile(t, "t")
	sec := coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File, APITokenFile: tok}
	with := func(f func(*coordinator.Config)) coordinator.Config { c := sec; f(&c); return c }
	tests := []struct {
		name string
		cfg  coordinator.Config
		want string
	}{
		{"token off loopback", with(func(c *coordinator.Config) { c.WebAddress = "0.0.0.0:0" }), "--web-tls-cert"},
		{"token on all addresses", with(func(c *coordinator.Config) { c.WebAddress = ":0" }), "--web-tls-cert"},
		{"key missing", with(func(c *coordinator.Config) { c.WebAddress = "127.0.0.1:0"; c.WebTLSCertFile = pki.Server.Cert }), "web-tls-key"},
		{"TLS without listener", with(func(c *coordinator.Config) { c.WebTLSCertFile, c.WebTLSKeyFile = pki.Server.Cert, pki.Server.Key }), "--web-listen"},
		{"web host without listener", with(func(c *coordinator.Config) { c.WebHosts = []string{"ui.example.com"} }), "--web-listen"},
		{"web host with a port", with(func(c *coordinator.Config) {
			c.WebAddress = "127.0.0.1:0"
			c.WebHosts = []string{"ui.example.com:8080"}
		}),
			`--web-host "ui.example.com:8080"`},
		{"web host as a URL", with(func(c *coordinator.Config) {
			c.WebAddress = "127.0.0.1:0"
			c.WebHosts = []string{"https://ui.example.com"}
		}),
			`--web-host "https://ui.example.com"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.cfg.ListenAddress = "127.0.0.1:0"
			tt.cfg.DBPath = filepath.Join(dir, "db")
			err := coordinator.Run(testnet.Ctx(t, 10*time.Second), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %v, want an error with %q", err, tt.want)
			}
			if _, err := os.Stat(tt.cfg.DBPath); err == nil {
				t.Errorf("Run created the store before refusing its configuration")
			}
		})
	}
}

// TestWebTLSReload: the web UI picks up a renewed certificate from its
// files without a restart, as the TCP listener and /metrics do.
func TestWebTLSReload(t *testing.T) {
	pki := mtlstest.New(t)
	live := pki.Server.Copy(t, t.TempDir(), "web")
	webAddr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	start(t, coordinator.Config{WebAddress: webAddr, WebTLSCertFile: live.Cert, WebTLSKeyFile: live.Key})
	now := time.Now()
	srv2 := pki.CA.Issue(t, "server-2", true, now.Add(-time.Hour), now.Add(time.Hour))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(readFile(t, pki.CA.File))
	serial := func() string {
		// a new connection each time: no kept-alive one from before
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + webAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.TLS.Version != tls.VersionTLS13 {
			t.Errorf("TLS version %x, want 1.3", resp.TLS.Version)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	if got, want := serial(), mtlstest.Serial(t, pki.Server.Cert).String(); got != want {
		t.Fatalf("serial %s, want the first certificate's %s", got, want)
	}
	mtlstest.ReplacePair(t, live, srv2)
	want, got := mtlstest.Serial(t, srv2.Cert).String(), ""
	if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool { got = serial(); return got == want }) {
		t.Errorf("serial %s after the renewal, want %s", got, want)
	}
}
