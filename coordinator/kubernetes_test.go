package coordinator_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/kube"
	deploykube "github.com/meshperf/meshperf/deploy/kubernetes"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	"github.com/meshperf/meshperf/internal/testutil/kubetest"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// The resources coordinator/kube manages, as the fake API's tracker names
// them. The test reads and edits objects through the tracker, so that
// Actions() holds the coordinator's calls only.
var (
	servicesGVR       = corev1.SchemeGroupVersion.WithResource("services")
	endpointSlicesGVR = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
)

// waitFor is how long the test waits for what the coordinator does on its
// own (Endpoints reaching the agents, a run, a prune); the polls end as
// soon as the condition holds.
const waitFor = 15 * time.Second

// TestKubernetesWiring runs the coordinator as `serve --kubernetes` does,
// with client-go's fake clientset in place of the API server and fake
// agents on real gRPC streams, and follows a node's Service through its
// life: created when the agent registers, its ClusterIP handed to every
// agent and used as the target of the service paths, its EndpointSlice
// repointed (and the Service repaired) when the pod IP changes, and both
// pruned once the node departed. Then it checks every API call the
// coordinator made against the Role and ClusterRole of deploy/kubernetes,
// and that they grant nothing the coordinator does not call.
func TestKubernetesWiring(t *testing.T) {
	const ns = kube.DefaultNamespace
	// What the namespace held before this coordinator started: the objects
	// of a node that left while no coordinator ran (pruned), and the
	// coordinator's own Service, which is not a node's and stays.
	leftover := "node-gone"
	leftoverSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: kube.Name(leftover), Namespace: ns, Labels: nodeLabels(leftover)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.200.1"}}
	leftoverSlice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: kube.Name(leftover), Namespace: ns, Labels: nodeLabels(leftover)},
		AddressType: discoveryv1.AddressTypeIPv4}
	own := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "meshperf-coordinator", Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/name": "meshperf-coordinator"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": "meshperf-coordinator"}, ClusterIP: "10.96.200.2"}}
	// The Nodes and pod endpoints the registrations are checked against;
	// node-1's pod endpoint is being replaced (the old pod and the new
	// one run), so that its agent registers first with one pod IP, then
	// with the other.
	cluster := []runtime.Object{leftoverSvc, leftoverSlice, own}
	for _, n := range []struct{ name, hostIP string }{{"node-1", "192.0.2.1"}, {"node-2", "192.0.2.2"}} {
		cluster = append(cluster, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.hostIP}}}})
	}
	for _, p := range []struct{ name, node, podIP string }{{"ep-1", "node-1", "198.51.100.1"}, {"ep-1-new", "node-1", "198.51.100.11"}, {"ep-2", "node-2", "198.51.100.2"}} {
		cluster = append(cluster, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "meshperf-endpoint"}},
			Spec: corev1.PodSpec{NodeName: p.node}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.podIP, PodIPs: []corev1.PodIP{{IP: p.podIP}}}})
	}
	api := kubetest.NewClientset(cluster...)

	addr, _, logs := start(t, coordinator.Config{KubeClient: api, KubePruneInterval: 50 * time.Millisecond, DepartAfter: 200 * time.Millisecond})
	conn := dial(t, addr, insecure.NewCredentials())
	mesh := meshv1.NewMeshServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Documentation addresses: the agents are fakes, nothing is sent there.
	nodes := []struct{ name, hostIP, podIP string }{
		{"node-1", "192.0.2.1", "198.51.100.1"},
		{"node-2", "192.0.2.2", "198.51.100.2"},
	}
	agents := map[string]*kubeAgent{}
	for _, n := range nodes {
		agents[n.name] = newKubeAgent(t, ctx, conn, n.name, n.hostIP, n.podIP)
	}

	// Registration created each node's Service and EndpointSlice before
	// the agent got its answer.
	clusterIPs := map[string]string{}
	for _, n := range nodes {
		svc := checkNodeObjects(t, api, n.name, n.podIP)
		if svc == nil {
			t.Fatalf("no objects for %s; log:\n%s", n.name, logs)
		}
		clusterIPs[n.name] = svc.Spec.ClusterIP
	}
	if clusterIPs["node-1"] == clusterIPs["node-2"] {
		t.Fatalf("both nodes got ClusterIP %s", clusterIPs["node-1"])
	}

	// Every agent learns every node's ClusterIP as its service IP.
	podIPs := map[string]string{}
	for _, n := range nodes {
		podIPs[n.name] = n.podIP
	}
	for _, a := range agents {
		a.waitEndpoints(t, clusterIPs, podIPs)
	}

	// A run over the service paths sends each client to the other node's
	// ClusterIP, from the network its path starts in.
	resp, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Label: "kube-wiring", Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_HTTP}}, Repeats: 1,
		Paths: []measurev1.Path{measurev1.Path_PATH_POD_TO_SERVICE, measurev1.Path_PATH_HOST_TO_SERVICE},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if run := waitRun(t, ctx, mesh, resp.GetRun().GetRunId()); run.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Fatalf("run ended %v, want SUCCEEDED: %v", run.GetState(), run)
	}
	for _, n := range nodes {
		other := "node-2"
		if n.name == other {
			other = "node-1"
		}
		var got []string
		for _, c := range agents[n.name].RunClients() {
			got = append(got, c.GetNetwork().String()+" -> "+c.GetTargetIp())
		}
		sort.Strings(got)
		want := []string{"NETWORK_HOST -> " + clusterIPs[other], "NETWORK_POD -> " + clusterIPs[other]}
		if !slices.Equal(got, want) {
			t.Errorf("%s's clients went %v, want %v (%s's ClusterIP from each network)", n.name, got, want, other)
		}
	}

	// Someone edits node-1's Service (a selector, a port gone); then its
	// pod is replaced and the agent registers again with the new pod IP.
	// The slice follows the pod, the Service is repaired, and the
	// ClusterIP, which the agents and the results know, stays.
	edited := getObject[*corev1.Service](t, api, servicesGVR, kube.Name("node-1"))
	edited.Spec.Selector = map[string]string{"app": "someone-else"}
	edited.Spec.Ports = edited.Spec.Ports[:1]
	if err := api.Tracker().Update(servicesGVR, edited, ns); err != nil {
		t.Fatal(err)
	}
	const newPodIP = "198.51.100.11"
	agents["node-1"] = newKubeAgent(t, ctx, conn, "node-1", "192.0.2.1", newPodIP)
	if svc := checkNodeObjects(t, api, "node-1", newPodIP); svc != nil && svc.Spec.ClusterIP != clusterIPs["node-1"] {
		t.Errorf("node-1's ClusterIP went from %s to %s on a new pod IP", clusterIPs["node-1"], svc.Spec.ClusterIP)
	}
	podIPs["node-1"] = newPodIP
	agents["node-2"].waitEndpoints(t, clusterIPs, podIPs)
	if !strings.Contains(logs.String(), "updated node EndpointSlice") {
		t.Errorf("the coordinator did not log the slice's update; log:\n%s", logs)
	}

	// node-2's agent leaves; once the node departed, the prune deletes its
	// objects, and those of the node that left before, but nothing else.
	agents["node-2"].Stop()
	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool {
		return !exists(t, api, servicesGVR, kube.Name("node-2")) && !exists(t, api, endpointSlicesGVR, kube.Name("node-2"))
	}) {
		t.Fatalf("node-2's Service or EndpointSlice still exists %v after it left; log:\n%s", waitFor, logs)
	}
	for _, o := range []struct {
		gvr       schema.GroupVersionResource
		name      string
		wantThere bool
	}{
		{servicesGVR, kube.Name("node-1"), true},
		{endpointSlicesGVR, kube.Name("node-1"), true},
		{servicesGVR, own.Name, true},
		{servicesGVR, leftoverSvc.Name, false},
		{endpointSlicesGVR, leftoverSlice.Name, false},
	} {
		if got := exists(t, api, o.gvr, o.name); got != o.wantThere {
			t.Errorf("%s %s exists: %v, want %v", o.gvr.Resource, o.name, got, o.wantThere)
		}
	}

	checkCallsMatchRole(t, api, ns)
}

// nodeLabels are the labels coordinator/kube puts on node's objects.
func nodeLabels(node string) map[string]string {
	return map[string]string{kube.LabelManagedBy: kube.ManagedBy, kube.LabelNode: node}
}

// checkNodeObjects checks node's Service and EndpointSlice in the fake API
// and returns the Service, or nil if it is missing.
func checkNodeObjects(t *testing.T, api *fake.Clientset, node, podIP string) *corev1.Service {
	t.Helper()
	name := kube.Name(node)
	svc := getObject[*corev1.Service](t, api, servicesGVR, name)
	sl := getObject[*discoveryv1.EndpointSlice](t, api, endpointSlicesGVR, name)
	if svc == nil || sl == nil {
		return nil
	}
	var bad []string
	badIf := func(cond bool, format string, args ...any) {
		if cond {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	want := nodeLabels(node)
	badIf(!hasLabels(svc.Labels, want), "Service labels %v, want %v", svc.Labels, want)
	badIf(svc.Annotations[kube.AnnotationNodeName] != node, "Service annotations %v", svc.Annotations)
	badIf(len(svc.Spec.Selector) != 0, "Service has selector %v: Kubernetes would manage its endpoints", svc.Spec.Selector)
	badIf(svc.Spec.Type != corev1.ServiceTypeClusterIP, "Service type %q", svc.Spec.Type)
	if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !ip.Is4() {
		bad = append(bad, fmt.Sprintf("Service ClusterIP %q", svc.Spec.ClusterIP))
	}
	var svcPorts, slicePorts, wantPorts []string
	// The fake agents register the default ports and an HTTP target, and
	// no probe plans: their Services carry those servers' ports alone.
	registered, err := kube.ServicePorts(protocol.ServerPorts{Iperf3: protocol.DefaultIperf3Port, Qperf: protocol.DefaultQperfPort,
		QperfData: protocol.DefaultQperfDataPort, HTTP: 8080})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range registered {
		wantPorts = append(wantPorts, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
	}
	for _, p := range svc.Spec.Ports {
		svcPorts = append(svcPorts, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
		badIf(p.TargetPort.IntValue() != int(p.Port), "Service port %s targets %v", p.Name, p.TargetPort)
	}
	badIf(!slices.Equal(svcPorts, wantPorts), "Service ports %v, want %v", svcPorts, wantPorts)

	want = maps.Clone(want)
	want[discoveryv1.LabelServiceName] = name
	badIf(!hasLabels(sl.Labels, want), "EndpointSlice labels %v, want %v", sl.Labels, want)
	badIf(sl.Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io" || sl.Labels[discoveryv1.LabelManagedBy] == "",
		"EndpointSlice managed by %q: Kubernetes' controller would take it over", sl.Labels[discoveryv1.LabelManagedBy])
	badIf(sl.AddressType != discoveryv1.AddressTypeIPv4, "EndpointSlice address type %q", sl.AddressType)
	if len(sl.Endpoints) != 1 {
		bad = append(bad, fmt.Sprintf("EndpointSlice endpoints %v, want one", sl.Endpoints))
	} else {
		ep := sl.Endpoints[0]
		badIf(!slices.Equal(ep.Addresses, []string{podIP}), "EndpointSlice addresses %v, want %s", ep.Addresses, podIP)
		badIf(ptr.Deref(ep.NodeName, "") != node, "EndpointSlice endpoint on node %v", ptr.Deref(ep.NodeName, ""))
		badIf(!ptr.Deref(ep.Conditions.Ready, false), "EndpointSlice endpoint not ready")
	}
	for _, p := range sl.Ports {
		slicePorts = append(slicePorts, fmt.Sprintf("%s %d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
	}
	badIf(!slices.Equal(slicePorts, wantPorts), "EndpointSlice ports %v, want %v (kube-proxy matches them by name)", slicePorts, wantPorts)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID}
	badIf(svc.UID == "" || len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0] != owner,
		"EndpointSlice owners %v, want %v", sl.OwnerReferences, owner)
	if len(bad) > 0 {
		t.Errorf("%s's objects:\n  %s", node, strings.Join(bad, "\n  "))
	}
	return svc
}

func hasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// getObject reads an object through the fake API's tracker (no action
// recorded); a missing one fails the test and returns the zero T.
func getObject[T runtime.Object](t *testing.T, api *fake.Clientset, gvr schema.GroupVersionResource, name string) T {
	t.Helper()
	var zero T
	o, err := api.Tracker().Get(gvr, kube.DefaultNamespace, name)
	if err != nil {
		t.Errorf("%s %s: %v", gvr.Resource, name, err)
		return zero
	}
	v, ok := o.(T)
	if !ok {
		t.Errorf("%s %s is a %T", gvr.Resource, name, o)
		return zero
	}
	return v
}

func exists(t *testing.T, api *fake.Clientset, gvr schema.GroupVersionResource, name string) bool {
	t.Helper()
	_, err := api.Tracker().Get(gvr, kube.DefaultNamespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("%s %s: %v", gvr.Resource, name, err)
	}
	return err == nil
}

// waitRun waits (at most waitFor) until the run ended.
func waitRun(t *testing.T, ctx context.Context, mesh meshv1.MeshServiceClient, runID string) *measurev1.Run {
	t.Helper()
	return testutil.WaitRunEnded(t, ctx, mesh, runID, waitFor)
}

// calledByIdentity are the Role's grants that coordinator/identity calls
// (reading the pod of an agent's token and the agent DaemonSet), not
// coordinator/kube; the Rogue token tests (identity_rogue_test.go) check
// them both ways.
var calledByIdentity = map[string]bool{"get /pods": true, "get apps/daemonsets": true, "create authentication.k8s.io/tokenreviews": true}

// checkCallsMatchRole checks the coordinator's calls to the API against
// the Role in deploy/kubernetes/base: every call is granted, in the Role's
// namespace, and every verb and resource the Role grants was called (the
// test above exercises every call coordinator/kube makes), so that the
// Role is exactly as wide as the coordinator needs.
func checkCallsMatchRole(t *testing.T, api *fake.Clientset, ns string) {
	t.Helper()
	role, err := deploykube.CoordinatorRole()
	if err != nil {
		t.Fatal(err)
	}
	clusterRole, err := deploykube.CoordinatorClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	if role.Namespace != ns {
		t.Errorf("the Role is in namespace %q; the coordinator's Services are in %q", role.Namespace, ns)
	}
	called := map[string]bool{}
	for _, a := range api.Actions() {
		gvr := a.GetResource()
		call := fmt.Sprintf("%s %s/%s", a.GetVerb(), gvr.Group, gvr.Resource)
		switch {
		case a.GetSubresource() != "":
			t.Errorf("%s on subresource %q: the Role grants none", call, a.GetSubresource())
		case a.GetNamespace() == "" && gvr.Resource == "nodes":
			if !deploykube.Allows(clusterRole.Rules, a.GetVerb(), gvr.Group, gvr.Resource) {
				t.Errorf("%s: the coordinator calls it, and the ClusterRole %s does not grant it", call, clusterRole.Name)
			}
		case a.GetNamespace() != ns:
			t.Errorf("%s in namespace %q, not the Role's %q", call, a.GetNamespace(), ns)
		case !deploykube.Allows(role.Rules, a.GetVerb(), gvr.Group, gvr.Resource):
			t.Errorf("%s: the coordinator calls it, and the Role %s does not grant it", call, role.Name)
		}
		called[call] = true
	}
	var unused []string
	for _, r := range slices.Concat(role.Rules, clusterRole.Rules) {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if call := fmt.Sprintf("%s %s/%s", v, g, res); !called[call] && !calledByIdentity[call] {
						unused = append(unused, call)
					}
				}
			}
		}
	}
	if len(unused) > 0 {
		t.Errorf("the Role %s grants %v, which the coordinator never called (it called %v): drop them from the Role, or exercise them here",
			role.Name, unused, slices.Sorted(maps.Keys(called)))
	}
}

// kubeAgent is a fake agent on a real gRPC stream (fakeagent.Play): it
// registers with a host and a pod address, keeps the last Endpoints and
// its work, and answers all work with canned successes (kubeAnswer).
type kubeAgent struct {
	*fakeagent.Agent
	node string
}

func newKubeAgent(t *testing.T, ctx context.Context, conn *grpc.ClientConn, node, hostIP, podIP string) *kubeAgent {
	t.Helper()
	reg := &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version, AgentVersion: "test",
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: hostIP},
			{Network: measurev1.Network_NETWORK_POD, Ip: podIP},
		}, HttpPort: 8080}
	return &kubeAgent{Agent: fakeagent.Play(t, ctx, agentv1.NewAgentServiceClient(conn), reg, fakeagent.Config{Answer: kubeAnswer}), node: node}
}

// kubeAnswer is the canned success for w: servers on 8080, HTTP clients
// of 1 ms.
func kubeAnswer(w *agentv1.Work) *agentv1.WorkResult {
	wr := &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK}
	switch w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		wr.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{Port: 8080}}
	case *agentv1.Work_StopServer:
		wr.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	case *agentv1.Work_RunClient:
		wr.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{
			Spec: w.GetRunClient().GetSpec(), Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, TotalSeconds: 0.001}},
		}}}}
	}
	return wr
}

// waitEndpoints waits until the agent's last Endpoints name exactly the
// nodes of serviceIPs, each with that service IP and the pod IP of podIPs.
func (a *kubeAgent) waitEndpoints(t *testing.T, serviceIPs, podIPs map[string]string) {
	t.Helper()
	want := map[string]string{}
	for n, ip := range serviceIPs {
		want[n] = "service " + ip + " pod " + podIPs[n]
	}
	var got map[string]string
	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool {
		got = map[string]string{}
		for _, n := range a.Endpoints().GetNodes() {
			pod := ""
			for _, addr := range n.GetAddresses() {
				if addr.GetNetwork() == measurev1.Network_NETWORK_POD {
					pod = addr.GetIp()
				}
			}
			got[n.GetNodeName()] = "service " + n.GetServiceIp() + " pod " + pod
		}
		return maps.Equal(got, want)
	}) {
		t.Fatalf("%s's agent got endpoints %v, want %v", a.node, got, want)
	}
}

// TestKubernetesServiceIPRetry: a node whose registration could not
// create its Service (the API server refused: down, overloaded) is
// connected without a service IP, and gets its ClusterIP once a retry
// creates the Service: the other agents then learn it, as they learn a
// node's that registered with one.
func TestKubernetesServiceIPRetry(t *testing.T) {
	const ns = kube.DefaultNamespace
	var cluster []runtime.Object
	nodes := []struct{ name, hostIP, podIP string }{{"node-1", "192.0.2.1", "198.51.100.1"}, {"node-2", "192.0.2.2", "198.51.100.2"}}
	for _, n := range nodes {
		cluster = append(cluster, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.hostIP}}}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ep-" + n.name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "meshperf-endpoint"}},
				Spec: corev1.PodSpec{NodeName: n.name}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: n.podIP, PodIPs: []corev1.PodIP{{IP: n.podIP}}}})
	}
	api := kubetest.NewClientset(cluster...)
	// node-1's first two Service creations fail, as with the API server
	// overloaded.
	var refused atomic.Int64
	api.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
		if ok && svc.Name == kube.Name("node-1") && refused.Add(1) <= 2 {
			return true, nil, apierrors.NewServiceUnavailable("the API server is overloaded")
		}
		return false, nil, nil
	})

	addr, _, logs := start(t, coordinator.Config{KubeClient: api, KubeServiceIPRetry: 10 * time.Millisecond})
	conn := dial(t, addr, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	node2 := newKubeAgent(t, ctx, conn, "node-2", "192.0.2.2", "198.51.100.2")
	newKubeAgent(t, ctx, conn, "node-1", "192.0.2.1", "198.51.100.1")

	if !testutil.Within(waitFor, 10*time.Millisecond, func() bool {
		return strings.Contains(logs.String(), "the node got its ClusterIP on retry")
	}) {
		t.Fatalf("node-1 never got its ClusterIP; log:\n%s", logs)
	}
	svc := checkNodeObjects(t, api, "node-1", "198.51.100.1")
	if svc == nil {
		t.Fatalf("node-1's objects are wrong; log:\n%s", logs)
	}
	other := checkNodeObjects(t, api, "node-2", "198.51.100.2")
	if other == nil {
		t.Fatalf("no objects for node-2; log:\n%s", logs)
	}
	if n := refused.Load(); n < 3 {
		t.Errorf("%d creations of node-1's Service, want the two refused and the one that took", n)
	}
	node2.waitEndpoints(t, map[string]string{"node-1": svc.Spec.ClusterIP, "node-2": other.Spec.ClusterIP},
		map[string]string{"node-1": "198.51.100.1", "node-2": "198.51.100.2"})
	if want := "no ClusterIP for the node's pod endpoint, asking again later"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs)
	}
}
