package coordinator_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/kube"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	"github.com/meshperf/meshperf/internal/testutil/kubetest"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// The attacks of issue 11 on addresses and ports: a session that
// registers an address no honest agent should be sent to, a port that is
// no port, or that answers StartServer with a port it did not register.
// The agents are fakes with documentation addresses (192.0.2.0/24 hosts,
// 198.51.100.0/24 pods): nothing is ever sent to them.

// addrPolicyConfig is a coordinator that allows no loopback or link-local
// address and takes hosts from 192.0.2.0/24 and pods from
// 198.51.100.0/24 only.
func addrPolicyConfig() coordinator.Config {
	return coordinator.Config{
		AllowAddresses: []registry.AddressClass{}, // none: not start's loopback
		NodeCIDRs:      []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		PodCIDRs:       []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
	}
}

// honestPorts are the ports of an agent that registered the defaults.
func honestPorts(tool measurev1.Tool) (uint32, uint32) {
	switch tool {
	case measurev1.Tool_TOOL_QPERF:
		return protocol.DefaultQperfPort, protocol.DefaultQperfDataPort
	case measurev1.Tool_TOOL_CURL:
		return 8080, 0
	}
	return protocol.DefaultIperf3Port, 0
}

// addrRegister is the Register of node on host and pod IPs, with the
// default server ports and HTTP on 8080.
func addrRegister(node, host, pod string) *agentv1.Register {
	return &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version, AgentVersion: "test", HttpPort: 8080,
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: host}, {Network: measurev1.Network_NETWORK_POD, Ip: pod}}}
}

// newAddrAgent plays a fake agent (fakeagent.Play): it registers reg,
// keeps the Endpoints it is sent and the RunClients it is ordered, and
// answers StartServer with serverPort's port and data port for the tool,
// clients with plausible successes.
func newAddrAgent(t *testing.T, ctx context.Context, conn *grpc.ClientConn, reg *agentv1.Register,
	serverPort func(measurev1.Tool) (uint32, uint32)) *fakeagent.Agent {
	t.Helper()
	return fakeagent.Play(t, ctx, agentv1.NewAgentServiceClient(conn), reg, fakeagent.Config{Answer: func(w *agentv1.Work) *agentv1.WorkResult {
		wr := &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK}
		switch act := w.GetAction().(type) {
		case *agentv1.Work_StartServer:
			port, data := serverPort(act.StartServer.GetTool())
			wr.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{Port: port, DataPort: data}}
		case *agentv1.Work_StopServer:
			wr.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
		case *agentv1.Work_RunClient:
			res := &measurev1.Result{Spec: act.RunClient.GetSpec(), Status: measurev1.Status_STATUS_OK}
			switch act.RunClient.GetSpec().GetTest() {
			case measurev1.Test_TEST_IPERF3_TCP:
				res.Metrics = &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 1e9}}
			case measurev1.Test_TEST_HTTP:
				res.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{TotalSeconds: 0.001, HttpCode: 200}}
			default:
				res.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 1, PacketsReceived: 1,
					RttMinSeconds: 1e-4, RttAvgSeconds: 1e-4, RttMaxSeconds: 1e-4}}
			}
			wr.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{res}}}
		}
		return wr
	}})
}

// refusedRegistration opens a session with reg and returns the status
// the coordinator ends it with.
func refusedRegistration(t *testing.T, ctx context.Context, conn *grpc.ClientConn, reg *agentv1.Register) *status.Status {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, m, err := fakeagent.Open(ctx, agentv1.NewAgentServiceClient(conn), reg)
	if err == nil {
		t.Fatalf("rogue registration %v answered %v, want a refusal", reg, m)
	}
	return status.Convert(err)
}

// storedAgainst returns the stored results whose source or destination
// is node.
func storedAgainst(t *testing.T, ctx context.Context, mesh meshv1.MeshServiceClient, node string) []*measurev1.Result {
	t.Helper()
	var out []*measurev1.Result
	for _, f := range []*meshv1.ListResultsRequest{{DstNode: node}, {SrcNode: node}} {
		resp, err := mesh.ListResults(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.GetResults()...)
	}
	return out
}

// TestRogueAddressRegistration: sessions registering the metadata
// service, loopback (without --allow-addresses), an address outside
// node_cidrs or a port of 99999 are each refused over real gRPC with the
// field and value named, in the answer and in the coordinator's log; they
// are not agents, no honest agent is told of their addresses, and a run
// over the default mesh orders no client to them and stores nothing
// against them.
func TestRogueAddressRegistration(t *testing.T) {
	addr, _, logs := start(t, addrPolicyConfig())
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor*2)
	defer cancel()
	honest := map[string]*fakeagent.Agent{
		"node-1": newAddrAgent(t, ctx, conn, addrRegister("node-1", "192.0.2.1", "198.51.100.1"), honestPorts),
		"node-2": newAddrAgent(t, ctx, conn, addrRegister("node-2", "192.0.2.2", "198.51.100.2"), honestPorts),
	}

	withPort := addrRegister("rogue-port", "192.0.2.50", "198.51.100.50")
	withPort.Iperf3Port = 99999
	outside := addrRegister("rogue-outside", "203.0.113.7", "198.51.100.51")
	rogues := []struct {
		name string
		reg  *agentv1.Register
		// bad are the rogue's addresses (none for the port case: its
		// addresses are fine, its port is not).
		bad    []string
		reason string
	}{
		{"rogue-metadata", addrRegister("rogue-metadata", "169.254.169.254", "198.51.100.52"), []string{"169.254.169.254"},
			"addresses[0].ip (host) 169.254.169.254 is link-local"},
		{"rogue-loopback", addrRegister("rogue-loopback", "192.0.2.53", "127.0.0.1"), []string{"127.0.0.1"},
			"addresses[1].ip (pod) 127.0.0.1 is a loopback address, refused unless the coordinator runs with --allow-addresses loopback"},
		{"rogue-outside", outside, []string{"203.0.113.7"}, "addresses[0].ip (host) 203.0.113.7 is outside node_cidrs (192.0.2.0/24)"},
		{"rogue-port", withPort, nil, "iperf3_port 99999 is not a port"},
	}
	for _, r := range rogues {
		st := refusedRegistration(t, ctx, conn, r.reg)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), r.reason) {
			t.Errorf("%s: refused with %v %q, want InvalidArgument with %q", r.name, st.Code(), st.Message(), r.reason)
		}
		if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { return strings.Contains(logs.String(), r.reason) }) {
			t.Errorf("%s: the coordinator's log lacks %q:\n%s", r.name, r.reason, logs)
		}
	}
	if !strings.Contains(logs.String(), `msg="registration refused" node=rogue-metadata`) {
		t.Errorf("no warning names the refused node; log:\n%s", logs)
	}

	resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range resp.GetAgents() {
		names = append(names, a.GetNodeName())
	}
	if !slices.Equal(names, []string{"node-1", "node-2"}) {
		t.Errorf("agents %v, want node-1 and node-2 alone", names)
	}
	for name, a := range honest {
		if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { return len(a.Endpoints().GetNodes()) == 2 }) {
			t.Fatalf("%s: endpoints %v, want both honest nodes", name, a.Endpoints())
		}
		for _, n := range a.Endpoints().GetNodes() {
			if !strings.HasPrefix(n.GetNodeName(), "node-") {
				t.Errorf("%s was told of endpoint %v", name, n)
			}
		}
	}

	run, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Label: "rogue-address", Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Repeats: 1,
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitRun(t, ctx, mesh, run.GetRun().GetRunId()); got.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED || got.GetTestsPlanned() != 2 {
		t.Errorf("run %v: want the two honest pairs, succeeded", got)
	}
	for name, a := range honest {
		for _, rc := range a.RunClients() {
			for _, r := range rogues {
				if slices.Contains(r.bad, rc.GetTargetIp()) {
					t.Errorf("%s was ordered to contact rogue %s at %s", name, r.name, rc.GetTargetIp())
				}
			}
			if !strings.HasPrefix(rc.GetTargetIp(), "192.0.2.") || rc.GetTargetIp() == "192.0.2.50" {
				t.Errorf("%s was ordered to contact %s, no honest node", name, rc.GetTargetIp())
			}
		}
	}
	for _, r := range rogues {
		if res := storedAgainst(t, ctx, mesh, r.name); len(res) != 0 {
			t.Errorf("results stored against %s: %v", r.name, res)
		}
	}
}

// TestRogueServerStartedPort: a registered session that answers
// StartServer with ports it did not register (18081 for iperf3, 80 for
// HTTP) gets its tests failed as STATUS_SERVER_ERROR naming the port, a
// warning naming node, tool and port in the coordinator's log, and no
// honest agent is ordered to run a client to it; an honest node's tests
// are unaffected.
func TestRogueServerStartedPort(t *testing.T) {
	addr, _, logs := start(t, addrPolicyConfig())
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor*2)
	defer cancel()
	honest := newAddrAgent(t, ctx, conn, addrRegister("node-1", "192.0.2.1", "198.51.100.1"), honestPorts)
	newAddrAgent(t, ctx, conn, addrRegister("node-2", "192.0.2.2", "198.51.100.2"), honestPorts)
	newAddrAgent(t, ctx, conn, addrRegister("rogue", "192.0.2.66", "198.51.100.66"), func(tool measurev1.Tool) (uint32, uint32) {
		if tool == measurev1.Tool_TOOL_CURL {
			return 80, 0 // 169.254.169.254:80's port, on its own address
		}
		return 18081, 0
	})

	run, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Label: "rogue-port", Repeats: 1, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_IPERF3_TCP}, {Test: measurev1.Test_TEST_HTTP}},
		Pairs: []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "rogue"}, {SrcNode: "node-1", DstNode: "node-2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, ctx, mesh, run.GetRun().GetRunId())

	for _, rc := range honest.RunClients() {
		if rc.GetTargetIp() != "192.0.2.2" {
			t.Errorf("node-1 was ordered to contact %s:%d (the rogue is 192.0.2.66)", rc.GetTargetIp(), rc.GetPort())
		}
	}
	if got := len(honest.RunClients()); got != 2 {
		t.Errorf("node-1 ran %d clients, want 2 (iperf3 and HTTP to node-2)", got)
	}
	against := storedAgainst(t, ctx, mesh, "rogue")
	if len(against) != 2 {
		t.Fatalf("results against the rogue: %v, want two refusals", against)
	}
	for _, r := range against {
		want := "with port 18081; it registered 5201"
		if r.GetSpec().GetTest() == measurev1.Test_TEST_HTTP {
			want = "with port 80; it registered 8080"
		}
		if r.GetStatus() != measurev1.Status_STATUS_SERVER_ERROR || !strings.Contains(r.GetMessage(), want) || r.GetMetrics() != nil {
			t.Errorf("result %v: want SERVER_ERROR with %q and no figure", r, want)
		}
	}
	resp, err := mesh.ListResults(ctx, &meshv1.ListResultsRequest{DstNode: "node-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResults()) != 2 || slices.ContainsFunc(resp.GetResults(), func(r *measurev1.Result) bool { return r.GetStatus() != measurev1.Status_STATUS_OK }) {
		t.Errorf("results node-1 -> node-2 %v, want two OK", resp.GetResults())
	}
	for _, want := range []string{`node=rogue tool=iperf3 port=18081`, `node=rogue tool=HTTP port=80`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the coordinator's log lacks %q:\n%s", want, logs)
		}
	}
}

// TestRogueKubeAddress: with --kubernetes, a session whose host IP is not
// its Node object's, whose pod IP is not its pod endpoint's, or that names
// a node the cluster does not have, is refused over real gRPC with the
// reason in the answer and the log; the honest node registers.
func TestRogueKubeAddress(t *testing.T) {
	ns := kube.DefaultNamespace
	api := kubetest.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ep-1", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "meshperf-endpoint"}},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "198.51.100.1"}})
	addr, _, logs := start(t, coordinator.Config{KubeClient: api})
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor*2)
	defer cancel()
	rogues := []struct {
		reg    *agentv1.Register
		reason string
	}{
		{addrRegister("node-1", "192.0.2.99", "198.51.100.1"), `host IP 192.0.2.99 is not an address of the Node object "node-1" (status.addresses InternalIP and ExternalIP: 192.0.2.1)`},
		{addrRegister("node-1", "192.0.2.1", "198.51.100.99"), `pod IP 198.51.100.99 is not an address of node "node-1"'s pod endpoint (status.podIPs: 198.51.100.1)`},
		{addrRegister("node-9", "192.0.2.9", "198.51.100.9"), `Node "node-9": not found in the cluster`},
	}
	for _, r := range rogues {
		st := refusedRegistration(t, ctx, conn, r.reg)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), r.reason) {
			t.Errorf("%v: refused with %v %q, want InvalidArgument with %q", r.reg.GetAddresses(), st.Code(), st.Message(), r.reason)
		}
		logged := strings.ReplaceAll(r.reason, `"`, `\"`) // as slog's text handler quotes it
		if !testutil.Within(waitFor, 10*time.Millisecond, func() bool { return strings.Contains(logs.String(), logged) }) {
			t.Errorf("the coordinator's log lacks %q", logged)
		}
	}
	newAddrAgent(t, ctx, conn, addrRegister("node-1", "192.0.2.1", "198.51.100.1"), honestPorts)
	resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetAgents()) != 1 || resp.GetAgents()[0].GetNodeName() != "node-1" || !resp.GetAgents()[0].GetConnected() {
		t.Errorf("agents %v, want node-1 alone, connected", resp.GetAgents())
	}
}

// TestRogueKubeServiceIP: with --kubernetes, an agent (of a real node)
// that registers no pod address and a service IP of its choosing does not
// get it: every other agent would test that address. The node gets no
// service IP (logged), in the Endpoints the others get and in its record.
func TestRogueKubeServiceIP(t *testing.T) {
	ns := kube.DefaultNamespace
	api := kubetest.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.2"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ep-1", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "meshperf-endpoint"}},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "198.51.100.1"}})
	addr, _, logs := start(t, coordinator.Config{KubeClient: api})
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor*2)
	defer cancel()
	honest := newAddrAgent(t, ctx, conn, addrRegister("node-1", "192.0.2.1", "198.51.100.1"), honestPorts)
	rogue := addrRegister("node-2", "192.0.2.2", "")
	rogue.Addresses = rogue.Addresses[:1] // no pod address
	rogue.ServiceIp = "203.0.113.7"
	newAddrAgent(t, ctx, conn, rogue, honestPorts)
	var node2 *agentv1.NodeEndpoint
	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool {
		for _, n := range honest.Endpoints().GetNodes() {
			if n.GetNodeName() == "node-2" {
				node2 = n
				return true
			}
		}
		return false
	}) {
		t.Fatalf("node-1 was never sent node-2's endpoint; last Endpoints %v", honest.Endpoints())
	}
	if node2.GetServiceIp() != "" {
		t.Errorf("node-1 is sent node-2's service IP %q, the rogue's; want none", node2.GetServiceIp())
	}
	resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range resp.GetAgents() {
		if a.GetNodeName() == "node-2" && a.GetServiceIp() != "" {
			t.Errorf("node-2's record has service IP %q, want none", a.GetServiceIp())
		}
	}
	if want := "the node registered no pod address"; !strings.Contains(logs.String(), want) {
		t.Errorf("the coordinator's log lacks %q:\n%s", want, logs)
	}
}
