package agent_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// work builds a Work: a positive timeout is its timeout, a zero one means
// none (a Work without timeout or deadline), a negative one a deadline in
// the past, which only a coordinator of the previous version can send.
func work(workID string, timeout time.Duration, action any) *agentv1.ConnectResponse {
	w := &agentv1.Work{WorkId: workID}
	switch {
	case timeout > 0:
		w.Timeout = durationpb.New(timeout)
	case timeout < 0:
		w.Deadline = timestamppb.New(time.Now().Add(timeout)) //nolint:staticcheck // SA1019: a past deadline comes only from a coordinator of the previous version
	}
	switch a := action.(type) {
	case *agentv1.Work_StartServer:
		w.Action = a
	case *agentv1.Work_RunClient:
		w.Action = a
	case *agentv1.Work_StopServer:
		w.Action = a
	case *agentv1.Work_CancelClient:
		w.Action = a
	case nil:
	default:
		panic(fmt.Sprintf("work: %T is not an action", action))
	}
	return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Work{Work: w}}
}

func endpoints(nodes ...*agentv1.NodeEndpoint) *agentv1.ConnectResponse {
	return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Endpoints{Endpoints: &agentv1.Endpoints{Nodes: nodes}}}
}

// withPorts gives ep the server ports of cfg, as the coordinator sends
// those an agent of cfg registered.
func withPorts(ep *agentv1.NodeEndpoint, cfg agent.Config) *agentv1.NodeEndpoint {
	ep.Iperf3Port, ep.QperfPort, ep.QperfDataPort, ep.HttpPort = cfg.Ports.Iperf3, cfg.Ports.Qperf, cfg.Ports.QperfData, cfg.HTTPPort
	return ep
}

func hostEndpoint(node, ip, serviceIP string) *agentv1.NodeEndpoint {
	return &agentv1.NodeEndpoint{NodeName: node, ServiceIp: serviceIP, Addresses: []*measurev1.NetworkAddress{
		{Network: measurev1.Network_NETWORK_HOST, Ip: ip},
	}}
}

var pingSpec = &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{
	Count: 2, Interval: durationpb.New(200 * time.Millisecond),
}}}

func runPing(target string) *agentv1.Work_RunClient {
	return &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: pingSpec, Network: measurev1.Network_NETWORK_HOST, TargetIp: target}}
}

func startServer(tool measurev1.Tool, network measurev1.Network) *agentv1.Work_StartServer {
	return &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{Tool: tool, Network: network}}
}

// outcomeKind names a WorkResult's outcome, to check that a failure still
// says which action it answers.
func outcomeKind(r *agentv1.WorkResult) string {
	switch r.GetOutcome().(type) {
	case *agentv1.WorkResult_ServerStarted:
		return "server_started"
	case *agentv1.WorkResult_ClientDone:
		return "client_done"
	case *agentv1.WorkResult_ServerStopped:
		return "server_stopped"
	}
	return "none"
}

// TestWork drives one agent through a session with a fake coordinator:
// targets must be registered endpoints (or allowlisted), every Work needs
// a test ID, an action and a deadline, and every answer says which action
// it answers.
func TestWork(t *testing.T) {
	testnet.Need(t, "ping", "qperf")
	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}
	startAgent(t, cfg)
	defer noServersLeft(t, cfg.Ports.Iperf3, cfg.Ports.Qperf)

	fs := next()
	if r := fs.reg; r.GetIperf3Port() != cfg.Ports.Iperf3 || r.GetQperfPort() != cfg.Ports.Qperf || r.GetQperfDataPort() != cfg.Ports.QperfData || r.GetHttpPort() != cfg.HTTPPort {
		t.Errorf("Register ports %d, %d, %d, HTTP %d: want the servers' %v and HTTP %d", r.GetIperf3Port(), r.GetQperfPort(), r.GetQperfDataPort(), r.GetHttpPort(), cfg.Ports, cfg.HTTPPort)
	}
	fs.accept(t, time.Second, 30*time.Second)
	fs.send(t, endpoints(hostEndpoint("node-a", "127.0.0.1", ""), withPorts(hostEndpoint("node-b", "127.0.0.2", "127.0.0.4"), cfg)))

	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	qperfLat := &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
		Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{
			Duration: durationpb.New(time.Second)}}},
		Network: host, TargetIp: "127.0.0.2", Port: cfg.Ports.Qperf, DataPort: cfg.Ports.QperfData,
	}}
	// An http_load (ab) to target on port.
	loadOn := func(target string, port uint32) *agentv1.Work_RunClient {
		return &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
			Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_HttpLoad{HttpLoad: &measurev1.HttpLoadParams{
				Requests: 10, Timeout: durationpb.New(2 * time.Second)}}},
			Network: host, TargetIp: target, Port: port,
		}}
	}
	// The same client on ports node-b did not register, and to node-b's
	// service IP, which takes node-b's ports.
	qperfOn := func(target string, port, dataPort uint32) *agentv1.Work_RunClient {
		rc := proto.CloneOf(qperfLat.RunClient)
		rc.TargetIp, rc.Port, rc.DataPort = target, port, dataPort
		return &agentv1.Work_RunClient{RunClient: rc}
	}
	stop := &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}
	const ok, invalid, timeout = measurev1.Status_STATUS_OK, measurev1.Status_STATUS_INVALID, measurev1.Status_STATUS_TIMEOUT
	steps := []struct {
		name        string
		before      *agentv1.ConnectResponse // sent before the work
		work        *agentv1.ConnectResponse
		testID      string
		wantStatus  measurev1.Status
		wantIn      string // in the message
		wantOutcome string
		check       func(*testing.T, *agentv1.WorkResult)
	}{
		{name: "registered endpoint", work: work("c1", 20*time.Second, runPing("127.0.0.2")), testID: "c1",
			wantStatus: ok, wantOutcome: "client_done", check: func(t *testing.T, r *agentv1.WorkResult) {
				res := r.GetClientDone().GetResults()
				if len(res) != 1 || res[0].GetPing().GetPacketsReceived() != 2 || res[0].GetTargetAddress() != "127.0.0.2" {
					t.Errorf("results %v, want one ping to 127.0.0.2 with 2 replies", res)
				}
			}},
		{name: "not a registered endpoint", work: work("c2", 20*time.Second, runPing("127.0.0.9")), testID: "c2",
			wantStatus: invalid, wantIn: "127.0.0.9", wantOutcome: "client_done", check: func(t *testing.T, r *agentv1.WorkResult) {
				res := r.GetClientDone().GetResults()
				if len(res) != 1 || res[0].GetStatus() != invalid || !strings.Contains(res[0].GetMessage(), "127.0.0.9") || res[0].GetMetrics() != nil {
					t.Errorf("results %v, want one INVALID result naming 127.0.0.9, without metrics", res)
				}
			}},
		{name: "target is not an IP", work: work("c3", 20*time.Second, runPing("node-b")), testID: "c3",
			wantStatus: invalid, wantIn: "node-b", wantOutcome: "client_done"},
		{name: "allowlisted target", work: work("c4", 20*time.Second, runPing("127.0.0.3")), testID: "c4",
			wantStatus: ok, wantOutcome: "client_done"},
		{name: "an endpoint's service IP", work: work("c5", 20*time.Second, runPing("127.0.0.4")), testID: "c5",
			wantStatus: ok, wantOutcome: "client_done"},
		{name: "client without a deadline", work: work("c6", 0, runPing("127.0.0.2")), testID: "c6",
			wantStatus: invalid, wantIn: "deadline", wantOutcome: "client_done"},
		{name: "server without a deadline", work: work("s0", 0, startServer(measurev1.Tool_TOOL_QPERF, host)), testID: "s0",
			wantStatus: invalid, wantIn: "deadline", wantOutcome: "server_started", check: func(t *testing.T, r *agentv1.WorkResult) {
				if pids := testutil.ToolServers(cfg.Ports.Qperf); len(pids) != 0 {
					t.Errorf("servers %v started for a refused work", pids)
				}
			}},
		{name: "no test ID", work: work("", 20*time.Second, runPing("127.0.0.2")), testID: "",
			wantStatus: invalid, wantIn: "test_id", wantOutcome: "client_done"},
		{name: "no action", work: work("n1", 20*time.Second, nil), testID: "n1",
			wantStatus: invalid, wantIn: "no action", wantOutcome: "none"},
		{name: "deadline passed", work: work("c7", -time.Second, runPing("127.0.0.2")), testID: "c7",
			wantStatus: timeout, wantIn: "already passed", wantOutcome: "client_done", check: func(t *testing.T, r *agentv1.WorkResult) {
				if pings := pingsTo("127.0.0.2"); len(pings) != 0 {
					t.Errorf("pings %v run for a work whose deadline passed", pings)
				}
			}},
		{name: "server with a deadline passed", work: work("s5", -time.Second, startServer(measurev1.Tool_TOOL_QPERF, host)), testID: "s5",
			wantStatus: timeout, wantIn: "already passed", wantOutcome: "server_started", check: func(t *testing.T, r *agentv1.WorkResult) {
				if pids := testutil.ToolServers(cfg.Ports.Qperf); len(pids) != 0 {
					t.Errorf("servers %v started for a work whose deadline passed", pids)
				}
			}},
		{name: "HTTP target with a deadline passed", work: work("h0", -time.Second, startServer(measurev1.Tool_TOOL_CURL, host)), testID: "h0",
			wantStatus: timeout, wantIn: "already passed", wantOutcome: "server_started"},
		{name: "HTTP target", work: work("h1", 10*time.Second, startServer(measurev1.Tool_TOOL_CURL, host)), testID: "h1",
			wantStatus: ok, wantOutcome: "server_started", check: func(t *testing.T, r *agentv1.WorkResult) {
				if got := r.GetServerStarted().GetPort(); got != cfg.HTTPPort {
					t.Errorf("HTTP target port %d, want %d", got, cfg.HTTPPort)
				}
			}},
		{name: "HTTP target on a network not served", work: work("h2", 10*time.Second, startServer(measurev1.Tool_TOOL_CURL, pod)), testID: "h2",
			wantStatus: measurev1.Status_STATUS_SERVER_ERROR, wantIn: "NETWORK_POD", wantOutcome: "server_started"},
		{name: "HTTP target for http_load", work: work("h3", 10*time.Second, startServer(measurev1.Tool_TOOL_AB, host)), testID: "h3",
			wantStatus: ok, wantOutcome: "server_started", check: func(t *testing.T, r *agentv1.WorkResult) {
				if got := r.GetServerStarted().GetPort(); got != cfg.HTTPPort {
					t.Errorf("HTTP target port %d, want %d", got, cfg.HTTPPort)
				}
			}},
		{name: "http_load on a port the target did not register", work: work("h4", 30*time.Second, loadOn("127.0.0.2", cfg.Ports.Qperf)), testID: "h4",
			wantStatus: invalid, wantIn: fmt.Sprintf("port %d refused: node \"node-b\" (target_ip 127.0.0.2) registered %d for http_load", cfg.Ports.Qperf, cfg.HTTPPort), wantOutcome: "client_done"},
		{name: "http_load to an address that is no endpoint", work: work("h5", 30*time.Second, loadOn("127.0.0.9", cfg.HTTPPort)), testID: "h5",
			wantStatus: invalid, wantIn: "127.0.0.9", wantOutcome: "client_done"},
		{name: "qperf server", work: work("s1", 10*time.Second, startServer(measurev1.Tool_TOOL_QPERF, host)), testID: "s1",
			wantStatus: ok, wantOutcome: "server_started", check: func(t *testing.T, r *agentv1.WorkResult) {
				st := r.GetServerStarted()
				if st.GetPort() != cfg.Ports.Qperf || st.GetDataPort() != cfg.Ports.QperfData || !strings.HasPrefix(st.GetToolVersion(), "qperf") {
					t.Errorf("ServerStarted %v, want port %d, data port %d and qperf's version", st, cfg.Ports.Qperf, cfg.Ports.QperfData)
				}
			}},
		{name: "second server on the port", work: work("s2", 10*time.Second, startServer(measurev1.Tool_TOOL_QPERF, host)), testID: "s2",
			wantStatus: measurev1.Status_STATUS_BUSY, wantIn: `"s1"`, wantOutcome: "server_started"},
		{name: "client on a port the target did not register", work: work("s1", 30*time.Second, qperfOn("127.0.0.2", 18081, cfg.Ports.QperfData)), testID: "s1",
			wantStatus: invalid, wantIn: fmt.Sprintf("port 18081 refused: node \"node-b\" (target_ip 127.0.0.2) registered %d", cfg.Ports.Qperf), wantOutcome: "client_done"},
		{name: "client on a data port the target did not register", work: work("s1", 30*time.Second, qperfOn("127.0.0.2", cfg.Ports.Qperf, 99999)), testID: "s1",
			wantStatus: invalid, wantIn: "data_port 99999 refused", wantOutcome: "client_done"},
		{name: "client to a service IP on another port than its node's", work: work("s1", 30*time.Second, qperfOn("127.0.0.4", protocol.DefaultQperfPort, protocol.DefaultQperfDataPort)), testID: "s1",
			wantStatus: invalid, wantIn: "(target_ip 127.0.0.4) registered", wantOutcome: "client_done"},
		{name: "client against the server", work: work("s1", 30*time.Second, qperfLat), testID: "s1",
			wantStatus: ok, wantOutcome: "client_done", check: func(t *testing.T, r *agentv1.WorkResult) {
				res := r.GetClientDone().GetResults()
				// Loopback: 1 µs to 20 ms (milliseconds stored as seconds
				// would be far above).
				if len(res) != 1 || !(res[0].GetQperf().GetLatencySeconds() > 1e-6 && res[0].GetQperf().GetLatencySeconds() < 20e-3) {
					t.Errorf("results %v, want one qperf latency in (1 µs, 20 ms)", res)
				}
			}},
		// Too late to answer OK, but a stop is done anyway: it is cleanup.
		{name: "stop with a deadline passed", work: work("s1", -time.Second, stop), testID: "s1",
			wantStatus: timeout, wantIn: "already passed", wantOutcome: "server_stopped", check: func(t *testing.T, r *agentv1.WorkResult) {
				noServersLeft(t, cfg.Ports.Qperf)
			}},
		{name: "stop the server", work: work("s1", 10*time.Second, stop), testID: "s1",
			wantStatus: ok, wantOutcome: "server_stopped", check: func(t *testing.T, r *agentv1.WorkResult) {
				noServersLeft(t, cfg.Ports.Qperf)
			}},
		{name: "stop a server that does not exist", work: work("s9", 10*time.Second, stop), testID: "s9",
			wantStatus: ok, wantOutcome: "server_stopped"},
		{name: "node-b left", before: endpoints(hostEndpoint("node-a", "127.0.0.1", "")),
			work: work("c8", 20*time.Second, runPing("127.0.0.2")), testID: "c8",
			wantStatus: invalid, wantIn: "127.0.0.2", wantOutcome: "client_done"},
	}
	for _, s := range steps {
		if s.before != nil {
			fs.send(t, s.before)
		}
		fs.send(t, s.work)
		r := fs.result(t, s.testID)
		if r.GetStatus() != s.wantStatus || !strings.Contains(r.GetMessage(), s.wantIn) {
			t.Errorf("%s: %v %q, want %v with %q", s.name, r.GetStatus(), r.GetMessage(), s.wantStatus, s.wantIn)
		}
		if got := outcomeKind(r); got != s.wantOutcome {
			t.Errorf("%s: outcome %s, want %s", s.name, got, s.wantOutcome)
		}
		if s.check != nil {
			s.check(t, r)
		}
	}
}

// pingsTo lists the ping processes sending to target.
func pingsTo(target string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(argv[0]) == "ping" && slices.Contains(argv, target) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestMaxClients: with every client slot taken, a client waits for one
// until its deadline and then answers TIMEOUT; beyond 4 client runs a
// slot, running or waiting, one is refused at once as BUSY, and those
// that waited run once the slot is free.
func TestMaxClients(t *testing.T) {
	testnet.Need(t, "ping")
	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.MaxClients = 1
	// A target of this test only, so that its ping can be told apart.
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	startAgent(t, cfg)
	fs := next()
	fs.accept(t, time.Second, 30*time.Second)

	const busyTarget = "127.0.0.33"
	long := &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
		Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{
			Count: 10, Interval: durationpb.New(200 * time.Millisecond)}}},
		Network: measurev1.Network_NETWORK_HOST, TargetIp: busyTarget,
	}}
	fs.send(t, work("long", 30*time.Second, long))
	if !testutil.Within(30*time.Second, 20*time.Millisecond, func() bool { return len(pingsTo(busyTarget)) > 0 }) {
		t.Fatal("the first client never started")
	}
	// The slot stays taken for the rest of the first ping's 2 s.
	fs.send(t, work("waits", 300*time.Millisecond, runPing("127.0.0.2")))
	r := fs.result(t, "waits")
	if r.GetStatus() != measurev1.Status_STATUS_TIMEOUT || !strings.Contains(r.GetMessage(), "no free client slot before the deadline (1 of 1 clients running)") {
		t.Errorf("second client: %v %q, want TIMEOUT for want of a client slot, with 1 of 1 running", r.GetStatus(), r.GetMessage())
	}
	// Three more wait (4 a slot in all, the running one too), two of them
	// with one work ID (each counts); the next is refused at once, busy.
	for _, id := range []string{"queued-0", "queued-0", "queued-1"} {
		fs.send(t, work(id, 30*time.Second, runPing("127.0.0.2")))
	}
	fs.send(t, work("refused", 30*time.Second, runPing("127.0.0.2")))
	r = fs.result(t, "refused")
	if r.GetStatus() != measurev1.Status_STATUS_BUSY || !strings.Contains(r.GetMessage(), "4 client runs are running, waiting for a slot or for their result to be sent on this agent, the most it takes (4 x 1 slots)") {
		t.Errorf("fifth client: %v %q, want BUSY naming 4 of 4 x 1", r.GetStatus(), r.GetMessage())
	}
	// The first, then the queued ones in the order they get the slot.
	done := fs.results(t, 4)
	for _, r := range done {
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			t.Errorf("%s: %v %q, want OK", r.GetWorkId(), r.GetStatus(), r.GetMessage())
		}
	}
	if got := slices.Sorted(slices.Values(ids(done))); !slices.Equal(got, []string{"long", "queued-0", "queued-0", "queued-1"}) {
		t.Errorf("answered %v, want long and the three queued", got)
	}
}

// TestTargetRefused: a client whose target is neither a registered
// endpoint nor allowlisted is refused before any tool runs, by a message
// that names the target and the allowed set.
func TestTargetRefused(t *testing.T) {
	many := []*agentv1.NodeEndpoint{}
	for i := 1; i <= 10; i++ {
		many = append(many, hostEndpoint(fmt.Sprintf("node-%d", i), fmt.Sprintf("127.0.1.%d", i), ""))
	}
	tests := []struct {
		name      string
		allow     []netip.Prefix
		endpoints []*agentv1.NodeEndpoint // nil: the coordinator sends none
		target    string
		wantIn    []string
	}{
		{"outside allowlist and endpoints", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.3/32")},
			[]*agentv1.NodeEndpoint{hostEndpoint("node-a", "127.0.0.1", ""), hostEndpoint("node-b", "127.0.0.2", "127.0.0.4")}, "192.0.2.1",
			[]string{"target_ip 192.0.2.1 refused", "registered endpoints 127.0.0.1, 127.0.0.2, 127.0.0.4", "--allow-target 10.1.0.0/16, 127.0.0.3/32"}},
		{"no allowlist, no endpoints yet", nil, nil, "127.0.0.9",
			[]string{"target_ip 127.0.0.9 refused", "registered endpoints none", "--allow-target none"}},
		{"many endpoints", nil, many, "127.0.0.9",
			[]string{"127.0.1.1, 127.0.1.2, 127.0.1.3", "and 2 more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, next := sessions(t)
			cfg := baseConfig(t, target, "node-a")
			cfg.AllowTargets = tt.allow
			startAgent(t, cfg)
			fs := next()
			fs.accept(t, time.Second, 30*time.Second)
			if tt.endpoints != nil {
				fs.send(t, endpoints(tt.endpoints...))
			}
			fs.send(t, work("c", 20*time.Second, runPing(tt.target)))
			r := fs.result(t, "c")
			if r.GetStatus() != measurev1.Status_STATUS_INVALID {
				t.Errorf("status %v, want INVALID", r.GetStatus())
			}
			for _, want := range tt.wantIn {
				if !strings.Contains(r.GetMessage(), want) {
					t.Errorf("refusal %q lacks %q", r.GetMessage(), want)
				}
			}
			if res := r.GetClientDone().GetResults(); len(res) != 1 || res[0].GetMessage() != r.GetMessage() || res[0].GetTargetAddress() != tt.target {
				t.Errorf("results %v, want one naming the target with the same refusal", res)
			}
		})
	}
}
