package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// fakeResolver answers the agent's lookups from a table the test sets, and
// records them; it sends no DNS query.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   []string
}

func (f *fakeResolver) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var as []netip.Addr
	for _, s := range addrs {
		as = append(as, netip.MustParseAddr(s))
	}
	f.answers[host] = as
}

func (f *fakeResolver) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, network+" "+host)
	if as, ok := f.answers[host]; ok {
		return as, nil
	}
	return nil, errors.New("no such host (fake resolver)")
}

func (f *fakeResolver) lookups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// httpServer serves 200 on /path (recording each request's Host header)
// and 404 elsewhere, on a fresh port of ip, until the test ends.
func httpServer(t *testing.T, ip string) (port int, hosts func() []string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/path" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		seen = append(seen, r.Host)
		mu.Unlock()
		_, _ = fmt.Fprintln(w, "external")
	}))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func externalEndpoints(targets ...*measurev1.ExternalTarget) *agentv1.ConnectResponse {
	return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: &agentv1.Endpoints{
		Nodes:           []*agentv1.NodeEndpoint{hostEndpoint("node-a", "127.0.0.1", "")},
		ExternalTargets: targets,
	}}}
}

func runExternal(test measurev1.Test, name string) *agentv1.Work_RunClient {
	spec := &measurev1.TestSpec{Test: test}
	if test == measurev1.Test_TEST_PING {
		spec = pingSpec
	}
	return &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: spec, Network: measurev1.Network_NETWORK_HOST, ExternalTarget: name}}
}

// TestExternalTargets drives one agent through a session with a fake
// coordinator that lists external targets: the agent keeps the valid
// entries of the last list, resolves names through its injected resolver
// (no DNS query), runs real ping and curl to the resolved loopback
// addresses only, pins curl to the address it resolved, and refuses what
// an external target may not be asked.
func TestExternalTargets(t *testing.T) {
	testnet.Need(t, "ping", "curl")
	port1, hosts1 := httpServer(t, "127.0.0.1")
	// Only on 127.0.0.2: curl reaches it through "localhost" only if it
	// uses the agent's pin rather than its own idea of localhost.
	port2, hosts2 := httpServer(t, "127.0.0.2")
	res := &fakeResolver{answers: map[string][]netip.Addr{}}
	res.set("localhost", "::1", "127.0.0.1") // the IPv4 answer wins

	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.LookupNetIP = res.lookup
	// Loopback is an external target's address only within --allow-target.
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	logs := captureLogs(&cfg)
	startAgent(t, cfg)
	fs := next()
	fs.accept(t, time.Second, 30*time.Second)
	url1 := fmt.Sprintf("http://localhost:%d/path", port1)
	url2 := fmt.Sprintf("http://localhost:%d/path", port2)
	fs.send(t, externalEndpoints(
		&measurev1.ExternalTarget{Name: "web", Address: "localhost", HttpUrl: url1},
		&measurev1.ExternalTarget{Name: "Bad_Name", Address: "127.0.0.1"},
		&measurev1.ExternalTarget{Name: "pinned", Address: "localhost", HttpUrl: url2},
		&measurev1.ExternalTarget{Name: "loop", Address: "127.0.0.1"},
		&measurev1.ExternalTarget{Name: "loop", Address: "127.0.0.5"},
		&measurev1.ExternalTarget{Name: "wrong-host", Address: "localhost", HttpUrl: "http://127.0.0.1/path"},
		&measurev1.ExternalTarget{Name: "zero", Address: "0.0.0.0"},
		&measurev1.ExternalTarget{Name: "gone", Address: "gone.example.com"},
		&measurev1.ExternalTarget{Name: "metadata", Address: "md.example.com", HttpUrl: "http://md.example.com/latest/meta-data/"},
	))
	res.set("md.example.com", "169.254.169.254")

	const ok, invalid = measurev1.Status_STATUS_OK, measurev1.Status_STATUS_INVALID
	known := "known: web, pinned, loop, gone, metadata"
	steps := []struct {
		name       string
		before     func()
		work       *agentv1.Work_RunClient
		wantStatus measurev1.Status
		wantIn     []string // in the message
		wantTarget string   // the result's target_address
		check      func(*testing.T, *measurev1.Result)
	}{
		{name: "http by DNS name", work: runExternal(measurev1.Test_TEST_HTTP, "web"), wantStatus: ok, wantTarget: "127.0.0.1",
			check: func(t *testing.T, r *measurev1.Result) {
				if r.GetHttp().GetHttpCode() != 200 {
					t.Errorf("HTTP metrics %v, want code 200", r.GetHttp())
				}
				if got, want := hosts1(), fmt.Sprintf("localhost:%d", port1); len(got) != 1 || got[0] != want {
					t.Errorf("server saw Host %q, want [%s]", got, want)
				}
			}},
		{name: "http pinned to the resolved address", before: func() { res.set("localhost", "127.0.0.2") },
			work: runExternal(measurev1.Test_TEST_HTTP, "pinned"), wantStatus: ok, wantTarget: "127.0.0.2",
			check: func(t *testing.T, r *measurev1.Result) {
				if got := hosts2(); len(got) != 1 {
					t.Errorf("the server on 127.0.0.2 saw %q, want one request", got)
				}
			}},
		{name: "ping an IP literal", work: runExternal(measurev1.Test_TEST_PING, "loop"), wantStatus: ok, wantTarget: "127.0.0.1",
			check: func(t *testing.T, r *measurev1.Result) {
				if r.GetPing().GetPacketsReceived() != 2 {
					t.Errorf("ping metrics %v, want 2 replies", r.GetPing())
				}
			}},
		{name: "unknown name", work: runExternal(measurev1.Test_TEST_PING, "nope"), wantStatus: invalid,
			wantIn: []string{`external_target "nope" refused`, known}},
		{name: "dropped entry: bad name", work: runExternal(measurev1.Test_TEST_PING, "Bad_Name"), wantStatus: invalid,
			wantIn: []string{`external_target "Bad_Name" refused`, known}},
		{name: "dropped entry: URL host is not the address", work: runExternal(measurev1.Test_TEST_HTTP, "wrong-host"), wantStatus: invalid,
			wantIn: []string{`external_target "wrong-host" refused`}},
		{name: "dropped entry: unspecified address", work: runExternal(measurev1.Test_TEST_PING, "zero"), wantStatus: invalid,
			wantIn: []string{`external_target "zero" refused`}},
		{name: "target_ip also set", work: func() *agentv1.Work_RunClient {
			w := runExternal(measurev1.Test_TEST_PING, "loop")
			w.RunClient.TargetIp = "127.0.0.1"
			return w
		}(), wantStatus: invalid, wantIn: []string{`external_target "loop": target_ip "127.0.0.1"`}, wantTarget: "127.0.0.1"},
		{name: "iperf3", work: runExternal(measurev1.Test_TEST_IPERF3_TCP, "web"), wantStatus: invalid,
			wantIn: []string{`external_target "web" has no iperf3_port: it takes no iperf3 test`}},
		{name: "qperf", work: runExternal(measurev1.Test_TEST_QPERF_TCP_BW, "web"), wantStatus: invalid,
			wantIn: []string{`external_target "web" has no qperf_port and qperf_data_port`}},
		{name: "http without http_url", work: runExternal(measurev1.Test_TEST_HTTP, "loop"), wantStatus: invalid,
			wantIn: []string{`external_target "loop" has no http_url`}},
		{name: "resolver error", work: runExternal(measurev1.Test_TEST_PING, "gone"), wantStatus: measurev1.Status_STATUS_UNREACHABLE,
			wantIn: []string{"resolve gone.example.com: no such host (fake resolver)"}},
		{name: "name resolving to the cloud metadata service", work: runExternal(measurev1.Test_TEST_HTTP, "metadata"), wantStatus: invalid,
			wantIn: []string{`external_target "metadata" refused: address md.example.com: no usable address in the answer [169.254.169.254]: 169.254.169.254 is link-local`}},
		{name: "the next list replaces this one", before: func() {
			fs.send(t, externalEndpoints(&measurev1.ExternalTarget{Name: "loop", Address: "127.0.0.1"}))
		}, work: runExternal(measurev1.Test_TEST_HTTP, "web"), wantStatus: invalid, wantIn: []string{`external_target "web" refused`, "known: loop"}},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		id := fmt.Sprintf("x%d", i)
		fs.send(t, work(id, 30*time.Second, s.work))
		r := fs.result(t, id)
		rs := r.GetClientDone().GetResults()
		if r.GetStatus() != s.wantStatus || len(rs) != 1 || rs[0].GetStatus() != s.wantStatus {
			t.Errorf("%s: %v %q with results %v, want %v", s.name, r.GetStatus(), r.GetMessage(), rs, s.wantStatus)
			continue
		}
		for _, want := range s.wantIn {
			if !strings.Contains(r.GetMessage(), want) {
				t.Errorf("%s: message %q lacks %q", s.name, r.GetMessage(), want)
			}
		}
		if got := rs[0].GetTargetAddress(); got != s.wantTarget {
			t.Errorf("%s: target_address %q, want %q", s.name, got, s.wantTarget)
		}
		if s.check != nil {
			s.check(t, rs[0])
		}
	}
	// Names only: an IP literal never reaches the resolver, nor does a
	// refused request.
	if got, want := strings.Join(res.lookups(), ", "), "ip localhost, ip localhost, ip gone.example.com, ip md.example.com"; got != want {
		t.Errorf("lookups %q, want %q", got, want)
	}
	for _, want := range []string{`external_target=Bad_Name`, `external_target=loop address=127.0.0.5`, `external_target=wrong-host`, `external_target=zero`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning with %q in the log", want)
		}
	}
}
