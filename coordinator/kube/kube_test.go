package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/kubetest"
)

const ns = "mp-test"

// agentPorts are the server ports of an agent that runs every server on
// its default port.
var agentPorts = protocol.ServerPorts{Iperf3: protocol.DefaultIperf3Port, Qperf: protocol.DefaultQperfPort,
	QperfData: protocol.DefaultQperfDataPort, HTTP: protocol.DefaultHTTPPort, Probe: protocol.DefaultProbePort}

// newFake returns a fake clientset that, like the API server, allocates a
// ClusterIP (10.96.0.1, .2, ...) and a UID to every Service it creates.
func newFake(t *testing.T, objects ...runtime.Object) *fake.Clientset {
	t.Helper()
	return kubetest.NewClientset(objects...)
}

func newServices(t *testing.T, c *fake.Clientset) *Services {
	t.Helper()
	s, err := New(Config{Client: c, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func getService(t *testing.T, c *fake.Clientset, name string) *corev1.Service {
	t.Helper()
	svc, err := c.CoreV1().Services(ns).Get(testnet.Ctx(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Service %s: %v", name, err)
	}
	return svc
}

func getSlice(t *testing.T, c *fake.Clientset, name string) *discoveryv1.EndpointSlice {
	t.Helper()
	sl, err := c.DiscoveryV1().EndpointSlices(ns).Get(testnet.Ctx(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get EndpointSlice %s: %v", name, err)
	}
	return sl
}

// objectNames returns the names of the Services and EndpointSlices in ns.
func objectNames(t *testing.T, c *fake.Clientset) (svcs, sls []string) {
	t.Helper()
	ctx := testnet.Ctx(t, 10*time.Second)
	sl, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sl.Items {
		svcs = append(svcs, s.Name)
	}
	el, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range el.Items {
		sls = append(sls, s.Name)
	}
	return svcs, sls
}

func TestEnsureCreates(t *testing.T) {
	tests := []struct {
		name        string
		node        string
		podIP       netip.Addr
		wantName    string
		wantAddress discoveryv1.AddressType
		wantFamily  corev1.IPFamily
	}{
		{"ipv4", "node-1", netip.MustParseAddr("10.244.1.2"), "meshperf-ep-node-1", discoveryv1.AddressTypeIPv4, corev1.IPv4Protocol},
		{"ipv6", "node-2", netip.MustParseAddr("fd00::2"), "meshperf-ep-node-2", discoveryv1.AddressTypeIPv6, corev1.IPv6Protocol},
		{"dotted node", "ip-10-0-1-7.ec2.internal", netip.MustParseAddr("10.244.7.2"), Name("ip-10-0-1-7.ec2.internal"),
			discoveryv1.AddressTypeIPv4, corev1.IPv4Protocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFake(t)
			s := newServices(t, c)
			got, err := s.Ensure(testnet.Ctx(t, 10*time.Second), tt.node, tt.podIP, agentPorts)
			if err != nil {
				t.Fatal(err)
			}
			svc := getService(t, c, tt.wantName)
			if want := netip.MustParseAddr(svc.Spec.ClusterIP); got != want {
				t.Errorf("Ensure returned %v, the Service's ClusterIP is %v", got, want)
			}
			if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Selector) != 0 {
				t.Errorf("Service type %q selector %v, want ClusterIP without selector", svc.Spec.Type, svc.Spec.Selector)
			}
			if len(svc.Spec.IPFamilies) != 1 || svc.Spec.IPFamilies[0] != tt.wantFamily {
				t.Errorf("Service IP families %v, want [%s]", svc.Spec.IPFamilies, tt.wantFamily)
			}
			if svc.Labels[LabelManagedBy] != ManagedBy || svc.Labels[LabelNode] != tt.node || svc.Annotations[AnnotationNodeName] != tt.node {
				t.Errorf("Service labels %v annotations %v", svc.Labels, svc.Annotations)
			}
			var gotPorts []string
			for _, p := range svc.Spec.Ports {
				gotPorts = append(gotPorts, fmt.Sprintf("%s %d/%s->%s", p.Name, p.Port, p.Protocol, p.TargetPort.String()))
			}
			// Every server a default agent runs on its pod network: one left
			// out is unreachable on the service paths of a real cluster (the
			// probes' echo responder once was; the lab DNATs every port).
			wantPorts := []string{"iperf3-tcp 5201/TCP->5201", "iperf3-udp 5201/UDP->5201", "qperf 19765/TCP->19765",
				"qperf-data-tcp 19766/TCP->19766", "qperf-data-udp 19766/UDP->19766", "http 8080/TCP->8080",
				"probe-echo 7947/TCP->7947"}
			if strings.Join(gotPorts, ",") != strings.Join(wantPorts, ",") {
				t.Errorf("Service ports\n got %v\nwant %v", gotPorts, wantPorts)
			}

			sl := getSlice(t, c, tt.wantName)
			if sl.AddressType != tt.wantAddress {
				t.Errorf("slice address type %s, want %s", sl.AddressType, tt.wantAddress)
			}
			for k, v := range map[string]string{
				discoveryv1.LabelServiceName: tt.wantName, LabelManagedBy: ManagedBy, LabelNode: tt.node,
				discoveryv1.LabelManagedBy: sliceController,
			} {
				if sl.Labels[k] != v {
					t.Errorf("slice label %s = %q, want %q", k, sl.Labels[k], v)
				}
			}
			if len(sl.Endpoints) != 1 {
				t.Fatalf("slice has %d endpoints, want 1", len(sl.Endpoints))
			}
			ep := sl.Endpoints[0]
			if len(ep.Addresses) != 1 || ep.Addresses[0] != tt.podIP.String() {
				t.Errorf("endpoint addresses %v, want [%s]", ep.Addresses, tt.podIP)
			}
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				t.Errorf("endpoint not ready: %+v", ep.Conditions)
			}
			if ep.NodeName == nil || *ep.NodeName != tt.node {
				t.Errorf("endpoint node name %v, want %s", ep.NodeName, tt.node)
			}
			if len(sl.Ports) != len(svc.Spec.Ports) {
				t.Fatalf("slice has %d ports, the Service %d", len(sl.Ports), len(svc.Spec.Ports))
			}
			for i, p := range sl.Ports {
				if sp := svc.Spec.Ports[i]; *p.Name != sp.Name || *p.Port != sp.Port || *p.Protocol != sp.Protocol {
					t.Errorf("slice port %d %s %d/%s does not match the Service's %s %d/%s", i, *p.Name, *p.Port, *p.Protocol, sp.Name, sp.Port, sp.Protocol)
				}
			}
			if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].UID != svc.UID || sl.OwnerReferences[0].Kind != "Service" {
				t.Errorf("slice owners %+v, want the Service (uid %s)", sl.OwnerReferences, svc.UID)
			}
		})
	}
}

// node1PodIP is node-1's pod IP in ensureNode1.
var node1PodIP = netip.MustParseAddr("10.244.1.2")

// ensureNode1 creates node-1's Service and EndpointSlice in a new fake
// clientset, for an agent on agentPorts at node1PodIP, and returns the
// clientset, the Services and the ClusterIP.
func ensureNode1(t *testing.T) (*fake.Clientset, *Services, netip.Addr) {
	t.Helper()
	c := newFake(t)
	s := newServices(t, c)
	ip, err := s.Ensure(testnet.Ctx(t, 10*time.Second), "node-1", node1PodIP, agentPorts)
	if err != nil {
		t.Fatal(err)
	}
	return c, s, ip
}

// countWrites counts create, update and delete calls.
func countWrites(c *fake.Clientset) func() int {
	mark := len(c.Actions())
	return func() int {
		n := 0
		for _, a := range c.Actions()[mark:] {
			switch a.GetVerb() {
			case "create", "update", "delete", "patch":
				n++
			}
		}
		return n
	}
}

func TestEnsureIdempotentAndPodIPChange(t *testing.T) {
	ip1, ip2 := netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("10.244.1.9")
	tests := []struct {
		name       string
		second     netip.Addr
		wantWrites int
		wantSlice  string
	}{
		{"same pod IP: nothing written", ip1, 0, ip1.String()},
		{"new pod IP: the slice alone is updated", ip2, 1, ip2.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFake(t)
			s := newServices(t, c)
			ctx := testnet.Ctx(t, 10*time.Second)
			first, err := s.Ensure(ctx, "node-1", ip1, agentPorts)
			if err != nil {
				t.Fatal(err)
			}
			uid := getService(t, c, "meshperf-ep-node-1").UID
			writes := countWrites(c)
			second, err := s.Ensure(ctx, "node-1", tt.second, agentPorts)
			if err != nil {
				t.Fatal(err)
			}
			if second != first {
				t.Errorf("ClusterIP changed from %v to %v", first, second)
			}
			if got := writes(); got != tt.wantWrites {
				t.Errorf("%d writes, want %d: %v", got, tt.wantWrites, c.Actions())
			}
			if got := getService(t, c, "meshperf-ep-node-1").UID; got != uid {
				t.Errorf("Service replaced: uid %s, was %s", got, uid)
			}
			if got := getSlice(t, c, "meshperf-ep-node-1").Endpoints[0].Addresses; len(got) != 1 || got[0] != tt.wantSlice {
				t.Errorf("slice addresses %v, want [%s]", got, tt.wantSlice)
			}
		})
	}
}

func TestEnsureRepairs(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(c *fake.Clientset)
	}{
		{"slice deleted", func(c *fake.Clientset) {
			_ = c.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), "meshperf-ep-node-1", metav1.DeleteOptions{})
		}},
		{"slice endpoint not ready", func(c *fake.Clientset) {
			sl, _ := c.DiscoveryV1().EndpointSlices(ns).Get(context.Background(), "meshperf-ep-node-1", metav1.GetOptions{})
			f := false
			sl.Endpoints[0].Conditions.Ready = &f
			_, _ = c.DiscoveryV1().EndpointSlices(ns).Update(context.Background(), sl, metav1.UpdateOptions{})
		}},
		{"Service ports edited", func(c *fake.Clientset) {
			svc, _ := c.CoreV1().Services(ns).Get(context.Background(), "meshperf-ep-node-1", metav1.GetOptions{})
			svc.Spec.Ports = svc.Spec.Ports[:1]
			svc.Spec.Selector = map[string]string{"app": "x"}
			_, _ = c.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s, first := ensureNode1(t)
			ctx, ip := testnet.Ctx(t, 10*time.Second), node1PodIP
			tt.spoil(c)
			second, err := s.Ensure(ctx, "node-1", ip, agentPorts)
			if err != nil {
				t.Fatal(err)
			}
			if first != second {
				t.Errorf("ClusterIP changed from %v to %v", first, second)
			}
			svc := getService(t, c, "meshperf-ep-node-1")
			if len(svc.Spec.Ports) != 7 || len(svc.Spec.Selector) != 0 { // agentPorts: 5 servers, 2 of them on UDP too
				t.Errorf("Service not repaired: ports %v selector %v", svc.Spec.Ports, svc.Spec.Selector)
			}
			if ep := getSlice(t, c, "meshperf-ep-node-1").Endpoints[0]; !*ep.Conditions.Ready || ep.Addresses[0] != ip.String() {
				t.Errorf("slice not repaired: %+v", ep)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	c := newFake(t)
	s := newServices(t, c)
	ctx := testnet.Ctx(t, 10*time.Second)
	for i, node := range []string{"node-1", "node-2"} {
		if _, err := s.Ensure(ctx, node, netip.AddrFrom4([4]byte{10, 244, byte(i), 2}), agentPorts); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the second time finds nothing, which is no error
		if err := s.Remove(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
	}
	svcs, sls := objectNames(t, c)
	if strings.Join(svcs, ",") != "meshperf-ep-node-2" || strings.Join(sls, ",") != "meshperf-ep-node-2" {
		t.Errorf("after Remove(node-1): services %v slices %v, want node-2's only", svcs, sls)
	}
}

// foreign is a Service and a slice that meshperf does not manage.
func foreign(name string) []runtime.Object {
	return []runtime.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "other"}},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.200.1"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "other"}},
			AddressType: discoveryv1.AddressTypeIPv4},
	}
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name string
		keep map[string]bool
		want string
	}{
		{"departed node-2 and node-3", map[string]bool{"node-1": true}, "meshperf-ep-node-1"},
		{"keep false means departed", map[string]bool{"node-1": true, "node-2": false, "node-3": true}, "meshperf-ep-node-1,meshperf-ep-node-3"},
		{"everything kept", map[string]bool{"node-1": true, "node-2": true, "node-3": true}, "meshperf-ep-node-1,meshperf-ep-node-2,meshperf-ep-node-3"},
		{"none kept", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFake(t, foreign("meshperf-ep-other")...)
			s := newServices(t, c)
			ctx := testnet.Ctx(t, 10*time.Second)
			for i, node := range []string{"node-1", "node-2", "node-3"} {
				if _, err := s.Ensure(ctx, node, netip.AddrFrom4([4]byte{10, 244, byte(i), 2}), agentPorts); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Prune(ctx, tt.keep); err != nil {
				t.Fatal(err)
			}
			svcs, sls := objectNames(t, c)
			want := "meshperf-ep-other" // never touched
			if tt.want != "" {
				want = tt.want + "," + want
			}
			if got := strings.Join(svcs, ","); got != want {
				t.Errorf("services %s, want %s", got, want)
			}
			if got := strings.Join(sls, ","); got != want {
				t.Errorf("slices %s, want %s", got, want)
			}
		})
	}
}

func TestEnsureRefusesForeignObjects(t *testing.T) {
	c := newFake(t, foreign("meshperf-ep-node-1")...)
	s := newServices(t, c)
	_, err := s.Ensure(testnet.Ctx(t, 10*time.Second), "node-1", netip.MustParseAddr("10.244.1.2"), agentPorts)
	if !errors.Is(err, ErrNotManaged) || !strings.Contains(err.Error(), "Service "+ns+"/meshperf-ep-node-1") {
		t.Errorf("err %v, want ErrNotManaged naming the Service", err)
	}
	if err := s.Remove(testnet.Ctx(t, 10*time.Second), "node-1"); err != nil {
		t.Fatal(err)
	}
	if svcs, sls := objectNames(t, c); len(svcs) != 1 || len(sls) != 1 {
		t.Errorf("Remove deleted a foreign object: services %v slices %v", svcs, sls)
	}
}

func TestAPIErrorsAreWrappedAndNameTheObject(t *testing.T) {
	tests := []struct {
		verb, resource string
		op             func(*Services, context.Context) error
		want           string
	}{
		{"get", "services", ensure, "get Service mp-test/meshperf-ep-node-1"},
		{"create", "services", ensure, "create Service mp-test/meshperf-ep-node-1"},
		{"create", "endpointslices", ensure, "create EndpointSlice mp-test/meshperf-ep-node-1"},
		{"delete", "services", func(s *Services, ctx context.Context) error {
			if _, err := s.Ensure(ctx, "node-1", netip.MustParseAddr("10.244.1.2"), agentPorts); err != nil {
				return err
			}
			return s.Remove(ctx, "node-1")
		}, "delete Service mp-test/meshperf-ep-node-1"},
		{"list", "endpointslices", func(s *Services, ctx context.Context) error { return s.Prune(ctx, nil) },
			"list EndpointSlices in mp-test"},
	}
	for _, tt := range tests {
		t.Run(tt.verb+" "+tt.resource, func(t *testing.T) {
			c := newFake(t)
			boom := apierrors.NewForbidden(corev1.Resource(tt.resource), "x", errors.New("RBAC says no"))
			c.PrependReactor(tt.verb, tt.resource, func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
			err := tt.op(newServices(t, c), testnet.Ctx(t, 10*time.Second))
			if !apierrors.IsForbidden(err) {
				t.Errorf("err %v does not wrap the API's Forbidden", err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func ensure(s *Services, ctx context.Context) error { //nolint:revive // context-as-argument: the table's op signature, receiver first like its method expressions
	_, err := s.Ensure(ctx, "node-1", netip.MustParseAddr("10.244.1.2"), agentPorts)
	return err
}

var dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func TestName(t *testing.T) {
	long := strings.Repeat("a", 70) + ".example.com"
	tests := []struct {
		node string
		want string // "" means: hashed, checked for form only
	}{
		{"node-1", "meshperf-ep-node-1"},
		{"0node", "meshperf-ep-0node"},
		{strings.Repeat("n", 51), "meshperf-ep-" + strings.Repeat("n", 51)}, // exactly 63
		{strings.Repeat("n", 52), ""},
		{"ip-10-0-1-7.ec2.internal", ""},
		{long, ""},
		{"a.b", ""},
		{"a-b", "meshperf-ep-a-b"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			got := Name(tt.node)
			if len(got) > 63 || !dns1035.MatchString(got) {
				t.Errorf("Name(%q) = %q, not a DNS-1035 label of at most 63 characters", tt.node, got)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("Name(%q) = %q, want %q", tt.node, got, tt.want)
			}
			if tt.want == "" && !strings.HasPrefix(got, "meshperf-ep-") {
				t.Errorf("Name(%q) = %q lacks the prefix", tt.node, got)
			}
			if v := nodeLabelValue(tt.node); len(v) > 63 || !isLabelValue(v) {
				t.Errorf("label value for %q is %q, not a label value", tt.node, v)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("%q and %q share the name %q", tt.node, other, got)
			}
			seen[got] = tt.node
		})
	}
	if Name("a.b") == Name("a-b") {
		t.Errorf("a.b and a-b share a name")
	}
	if Name(long) != Name(long) { //nolint:staticcheck // SA4000: two calls on purpose, to check that Name is stable
		t.Errorf("Name is not stable")
	}
}

func TestPruneEvery(t *testing.T) {
	c := newFake(t)
	s := newServices(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Ensure(ctx, "gone", netip.MustParseAddr("10.244.9.2"), agentPorts); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		done <- s.PruneEvery(runCtx, 10*time.Millisecond, func() map[string]bool { return nil })
	}()
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the prune of a node nobody keeps", func() bool {
		svcs, sls := objectNames(t, c)
		return len(svcs) == 0 && len(sls) == 0
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestClientOptions: the rate limits reach the client's config, zero
// meaning the default, and a bad one is refused naming its flag.
func TestClientOptions(t *testing.T) {
	for _, tt := range []struct {
		name      string
		o         ClientOptions
		qps       float32
		burst     int
		errSubstr string
	}{
		{"defaults", ClientOptions{}, DefaultQPS, DefaultBurst, ""},
		{"set", ClientOptions{QPS: 200, Burst: 400}, 200, 400, ""},
		{"fractional qps", ClientOptions{QPS: 0.5, Burst: 1}, 0.5, 1, ""},
		{"qps above the default burst, no burst", ClientOptions{QPS: 250.5}, 250.5, 251, ""},
		{"negative qps", ClientOptions{QPS: -1}, 0, 0, "--kube-qps -1 is not a positive"},
		{"infinite qps", ClientOptions{QPS: float32(math.Inf(1))}, 0, 0, "--kube-qps +Inf"},
		{"burst under qps", ClientOptions{QPS: 100, Burst: 10}, 0, 0, "--kube-burst 10 must be at least --kube-qps 100"},
		{"negative burst", ClientOptions{Burst: -5}, 0, 0, "--kube-burst -5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &rest.Config{}
			err := tt.o.apply(cfg)
			if tt.errSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSubstr) {
					t.Fatalf("apply(%+v) = %v, want an error with %q", tt.o, err, tt.errSubstr)
				}
				return
			}
			if err != nil || cfg.QPS != tt.qps || cfg.Burst != tt.burst {
				t.Errorf("apply(%+v) = %v, QPS %v, Burst %d; want QPS %v, Burst %d", tt.o, err, cfg.QPS, cfg.Burst, tt.qps, tt.burst)
			}
		})
	}
}
