package coordinator_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/coordinator/kube"
	deploykube "github.com/meshperf/meshperf/deploy/kubernetes"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/mtls/mtlstest"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	"github.com/meshperf/meshperf/internal/testutil/identitytest"
	"github.com/meshperf/meshperf/internal/testutil/kubetest"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// The rogue's host address in every identity attack: a documentation
// address, registered as a string and never sent to.
const rogueIP = "203.0.113.66"

// refusedLog is the coordinator's warning on a refused registration.
const refusedLog = "agent registration refused"

// rogueRegister opens a session over conn (with ctx's metadata) that
// registers as node from rogueIP, and returns how the coordinator ended it.
// A session that gets anything but a refusal fails the test.
func rogueRegister(t *testing.T, ctx context.Context, conn *grpc.ClientConn, node string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	_, m, err := fakeagent.Open(ctx, agentv1.NewAgentServiceClient(conn), rogueReg(node))
	if err == nil {
		t.Errorf("the rogue session registering as %s got %v, want a refusal", node, m)
	}
	return err
}

// rogueReg is the registration of a rogue claiming to be node from
// rogueIP.
func rogueReg(node string) *agentv1.Register {
	return &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version, AgentVersion: "rogue",
		Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: rogueIP}}}
}

// checkRefused checks that err is PermissionDenied with want in its message,
// and that the coordinator logged the refusal with the claimed node, the
// proven one and the reason.
func checkRefused(t *testing.T, err error, logs *testutil.SyncBuffer, claimed, proven, want string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), want) {
		t.Errorf("rogue registration as %s: %v; want PermissionDenied with %q", claimed, err, want)
	}
	want = strconv.Quote(want) // as the log's text handler writes the reason
	want = want[1 : len(want)-1]
	logged := testutil.Within(waitFor, 10*time.Millisecond, func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, refusedLog) && strings.Contains(l, "level=WARN") && strings.Contains(l, "claimed_node="+claimed) &&
				strings.Contains(l, "proven_node="+proven) && strings.Contains(l, "remote=127.0.0.1:") && strings.Contains(l, want) {
				return true
			}
		}
		return false
	})
	if !logged {
		t.Errorf("no warning %q with claimed_node=%s proven_node=%s and %q in the coordinator's log:\n%s", refusedLog, claimed, proven, want, logs)
	}
}

// checkNotHijacked checks that the rogue sessions reached nothing: every
// real agent's session lives on with its own address, no registration
// from rogueIP was logged, and a run sends each real node's tests to the
// real agents, whose results alone are stored.
func checkNotHijacked(t *testing.T, ctx context.Context, mesh meshv1.MeshServiceClient, agents map[string]*kubeAgent, hostIPs map[string]string, logs *testutil.SyncBuffer) {
	t.Helper()
	for node, a := range agents {
		select {
		case <-a.Done():
			t.Fatalf("%s's real session ended: a rogue registration replaced it; log:\n%s", node, logs)
		default:
		}
	}
	if strings.Contains(logs.String(), "host_ip="+rogueIP) {
		t.Errorf("a rogue Register reached the registry; log:\n%s", logs)
	}
	resp, err := mesh.ListAgents(ctx, &meshv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range resp.GetAgents() {
		want, known := hostIPs[ag.GetNodeName()]
		if !known || !ag.GetConnected() || len(ag.GetAddresses()) == 0 || ag.GetAddresses()[0].GetIp() != want {
			t.Errorf("agent %s (connected %v) at %v; want only the real agents, connected, at %v", ag.GetNodeName(), ag.GetConnected(), ag.GetAddresses(), hostIPs)
		}
	}
	run, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Label: "after-rogues", Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_HTTP}}, Repeats: 1,
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
	}})
	if err != nil {
		t.Fatal(err)
	}
	runID := run.GetRun().GetRunId()
	if r := waitRun(t, ctx, mesh, runID); r.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Fatalf("run ended %v, want SUCCEEDED: %v", r.GetState(), r)
	}
	for node, a := range agents {
		clients := a.RunClients()
		if len(clients) == 0 {
			t.Errorf("%s's real agent received none of its tests", node)
		}
		for _, c := range clients {
			if c.GetTargetIp() == rogueIP {
				t.Errorf("%s's agent was sent to the rogue's address %s", node, rogueIP)
			}
		}
	}
	results, err := mesh.ListResults(ctx, &meshv1.ListResultsRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	if len(results.GetResults()) != len(agents)*(len(agents)-1) {
		t.Errorf("run %s stored %d results, want %d (one per ordered pair of real nodes)", runID, len(results.GetResults()), len(agents)*(len(agents)-1))
	}
	for _, r := range results.GetResults() {
		_, src := hostIPs[r.GetSrcNode()]
		_, dst := hostIPs[r.GetDstNode()]
		if !src || !dst || r.GetStatus() != measurev1.Status_STATUS_OK || r.GetHttp().GetTotalSeconds() != 0.001 {
			t.Errorf("stored result %s -> %s %v %v: not a real agent's", r.GetSrcNode(), r.GetDstNode(), r.GetStatus(), r.GetMetrics())
		}
	}
}

// rogueLoop registers as node over conn (with ctx's metadata) again and
// again, as the issue's attacker did in a reconnect loop, until the
// returned stop is called; stop returns how many attempts were refused
// with PermissionDenied, and fails the test if any got another answer.
func rogueLoop(t *testing.T, ctx context.Context, conn *grpc.ClientConn, node string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	refused, other := 0, []error(nil)
	go func() { // owner: stop
		defer close(done)
		for ctx.Err() == nil {
			_, m, err := fakeagent.Open(ctx, agentv1.NewAgentServiceClient(conn), rogueReg(node))
			if err == nil {
				err = fmt.Errorf("got %v", m)
			}
			switch {
			case status.Code(err) == codes.PermissionDenied:
				refused++
			case ctx.Err() == nil:
				other = append(other, err)
			}
		}
	}()
	return func() int {
		cancel()
		<-done
		if len(other) > 0 {
			t.Errorf("rogue loop as %s: %d attempts not refused with PermissionDenied, the first: %v", node, len(other), other[0])
		}
		return refused
	}
}

// plaintextConn is a plaintext connection to addr, for token sessions.
func plaintextConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	return dial(t, addr, insecure.NewCredentials())
}

// TestRogueRegisterAsAnotherNodeMTLS: under mTLS, a session registers only
// as the node its client certificate names (URI SAN
// spiffe://meshperf/node/NODE). A rogue with node-a's certificate, with a
// remote user's API client certificate (no node SAN), with one naming two
// nodes or with another trust domain's SAN cannot register as node-b: each
// is refused with the reason, logged, and node-b's real session keeps its
// tests, also while a rogue re-registers in a loop.
func TestRogueRegisterAsAnotherNodeMTLS(t *testing.T) {
	pki := mtlstest.New(t)
	addr, sock, logs := start(t, coordinator.Config{TLSCertFile: pki.Server.Cert, TLSKeyFile: pki.Server.Key, TLSClientCAFile: pki.CA.File})
	mesh := meshv1.NewMeshServiceClient(dial(t, "unix://"+sock, insecure.NewCredentials()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hostIPs := map[string]string{"node-a": "192.0.2.1", "node-b": "192.0.2.2"}
	podIPs := map[string]string{"node-a": "198.51.100.1", "node-b": "198.51.100.2"}
	agents := map[string]*kubeAgent{}
	for node, ip := range hostIPs { // each with its own certificate: these register
		agents[node] = newKubeAgent(t, ctx, dial(t, addr, clientCreds(t, pki.CA.File, pki.CA.IssueNode(t, node))), node, ip, podIPs[node])
	}
	tests := []struct {
		name   string
		cert   mtlstest.Pair
		proven string
		want   string
	}{
		{"another node's certificate", pki.CA.IssueNode(t, "node-a"), "node-a", `Register names node "node-b" and the session proved node "node-a"`},
		{"API client certificate", pki.Client, "", "an API client certificate cannot register"},
		{"certificate naming two nodes", pki.CA.IssueURIs(t, "two-nodes", mtls.NodeURI("node-b"), mtls.NodeURI("node-c")), "", "2 node URI SANs"},
		{"another trust domain's SAN", pki.CA.IssueURIs(t, "evil", "spiffe://evil/node/node-b"), "", "no node URI SAN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rogueRegister(t, ctx, dial(t, addr, clientCreds(t, pki.CA.File, tt.cert)), "node-b")
			checkRefused(t, err, logs, "node-b", tt.proven, tt.want)
		})
	}
	// And in a reconnect loop while node-b's tests run.
	stop := rogueLoop(t, ctx, dial(t, addr, clientCreds(t, pki.CA.File, pki.CA.IssueNode(t, "node-a"))), "node-b")
	checkNotHijacked(t, ctx, mesh, agents, hostIPs, logs)
	if n := stop(); n == 0 {
		t.Error("the rogue loop made no attempt")
	}
}

// TestRogueRegisterWithTokenOfAnotherPod: with --kubernetes, a session
// registers only as the node its projected service-account token's pod
// runs on, and only if that pod is of the agent DaemonSet (TokenReview on
// client-go's fake clientset). A rogue with the token of node-a's agent
// pod, of a pod of another DaemonSet on node-b, with a forged token, a
// token for the API server, or none, cannot register as node-b; each is
// refused with the reason, logged, and node-b's real session keeps its
// tests, also while a rogue re-registers in a loop. The API calls it takes are those the deployed roles grant.
func TestRogueRegisterWithTokenOfAnotherPod(t *testing.T) {
	const ns = kube.DefaultNamespace
	api := kubetest.NewClientset(
		identitytest.DaemonSet(ns, identity.DefaultDaemonSet),
		identitytest.Pod(ns, "meshperf-agent-aaaaa", "uid-a", "node-a", "DaemonSet", identity.DefaultDaemonSet),
		identitytest.Pod(ns, "meshperf-agent-bbbbb", "uid-b", "node-b", "DaemonSet", identity.DefaultDaemonSet),
		identitytest.Pod(ns, "debug-xxxxx", "uid-x", "node-b", "DaemonSet", "meshperf-debug"),
		// The Nodes and pod endpoints the registrations' addresses are
		// checked against (documentation addresses: nothing is sent there).
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.2"}}}},
		endpointPod(ns, "ep-a", "node-a", "198.51.100.1"),
		endpointPod(ns, "ep-b", "node-b", "198.51.100.2"),
	)
	cluster := identitytest.New(api)
	token := func(pod, uid string, audience string) string {
		return cluster.Issue(identitytest.Token{Namespace: ns, ServiceAccount: "meshperf-agent", Pod: pod, PodUID: uid,
			Audiences: []string{audience}, Expires: time.Now().Add(time.Hour)})
	}
	tokens := map[string]string{
		"node-a": token("meshperf-agent-aaaaa", "uid-a", identity.Audience),
		"node-b": token("meshperf-agent-bbbbb", "uid-b", identity.Audience),
	}
	addr, sock, logs := start(t, coordinator.Config{KubeClient: api, AgentIdentity: coordinator.IdentityToken})
	mesh := meshv1.NewMeshServiceClient(dial(t, "unix://"+sock, insecure.NewCredentials()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := plaintextConn(t, addr)
	hostIPs := map[string]string{"node-a": "192.0.2.1", "node-b": "192.0.2.2"}
	podIPs := map[string]string{"node-a": "198.51.100.1", "node-b": "198.51.100.2"}
	agents := map[string]*kubeAgent{}
	for node, ip := range hostIPs { // each with its own pod's token: these register
		actx := metadata.AppendToOutgoingContext(ctx, identity.MetadataKey, tokens[node])
		agents[node] = newKubeAgent(t, actx, conn, node, ip, podIPs[node])
	}
	// Well-formed for the meshperf audience: only the TokenReview refuses it.
	const forged = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOlsibWVzaHBlcmYiXSwiZXhwIjo0MTAyNDQ0ODAwfQ.Zm9yZ2Vk"
	tests := []struct {
		name   string
		token  string // "" for none
		proven string
		want   string
	}{
		{"token of node-a's agent pod", tokens["node-a"], "node-a", `Register names node "node-b" and the session proved node "node-a"`},
		{"token of a pod of another DaemonSet on node-b", token("debug-xxxxx", "uid-x", identity.Audience), "",
			"pod meshperf/debug-xxxxx is not of the agent DaemonSet meshperf-agent"},
		{"token of node-b's pod for the API server", token("meshperf-agent-bbbbb", "uid-b", "https://kubernetes.default.svc"), "", `identity token's audiences ["https://kubernetes.default.svc"] lack "meshperf"`},
		{"forged token", forged, "", "invalid bearer token"},
		{"made-up token for no audience", "eyJhbGciOiJSUzI1NiJ9.e30.Zm9yZ2Vk", "", `identity token's audiences [] lack "meshperf"`},
		{"no token", "", "", "no identity token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rctx := ctx
			if tt.token != "" {
				rctx = metadata.AppendToOutgoingContext(ctx, identity.MetadataKey, tt.token)
			}
			err := rogueRegister(t, rctx, conn, "node-b")
			checkRefused(t, err, logs, "node-b", tt.proven, tt.want)
		})
	}
	// And in a reconnect loop while node-b's tests run.
	stop := rogueLoop(t, metadata.AppendToOutgoingContext(ctx, identity.MetadataKey, tokens["node-a"]), conn, "node-b")
	checkNotHijacked(t, ctx, mesh, agents, hostIPs, logs)
	if n := stop(); n == 0 {
		t.Error("the rogue loop made no attempt")
	}
	for _, tok := range append([]string{tokens["node-a"], tokens["node-b"]}, forged, "eyJhbGciOiJSUzI1NiJ9.e30.Zm9yZ2Vk") {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the coordinator logged an identity token")
		}
	}
	checkIdentityCallsGranted(t, api, ns)
}

// checkIdentityCallsGranted checks every API call the coordinator made
// against the roles of deploy/kubernetes/base: a namespaced one against
// the Role in its namespace, a cluster-scoped one against the ClusterRole;
// and that the identity grants (create tokenreviews, get pods) were used.
func checkIdentityCallsGranted(t *testing.T, api *fake.Clientset, ns string) {
	t.Helper()
	role, err := deploykube.CoordinatorRole()
	if err != nil {
		t.Fatal(err)
	}
	clusterRole, err := deploykube.CoordinatorClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	for _, a := range api.Actions() {
		gvr := a.GetResource()
		call := fmt.Sprintf("%s %s/%s", a.GetVerb(), gvr.Group, gvr.Resource)
		called[call] = true
		switch {
		case a.GetSubresource() != "":
			t.Errorf("%s on subresource %q: no role grants it", call, a.GetSubresource())
		case a.GetNamespace() == "":
			if !deploykube.Allows(clusterRole.Rules, a.GetVerb(), gvr.Group, gvr.Resource) {
				t.Errorf("%s (cluster-scoped): the ClusterRole %s does not grant it", call, clusterRole.Name)
			}
		case a.GetNamespace() != ns || role.Namespace != ns:
			t.Errorf("%s in namespace %q; the Role is in %q", call, a.GetNamespace(), role.Namespace)
		case !deploykube.Allows(role.Rules, a.GetVerb(), gvr.Group, gvr.Resource):
			t.Errorf("%s: the Role %s does not grant it", call, role.Name)
		}
	}
	for call := range calledByIdentity {
		if !called[call] {
			t.Errorf("the Role grants %s for the identity check, which the coordinator never called", call)
		}
	}
	if !called["create authentication.k8s.io/tokenreviews"] {
		t.Errorf("the coordinator never created a TokenReview; it called %v", called)
	}
}

// endpointPod is a running meshperf-endpoint pod on node with podIP.
func endpointPod(ns, name, node, podIP string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "meshperf-endpoint"}},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}}}}
}
