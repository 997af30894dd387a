package kube

import (
	"context"
	"fmt"
	"net/netip"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/kubetest"
)

// apiCalls counts the fake's actions by "verb resource", leaving out the
// informers' list and watch.
func apiCalls(actions []k8stesting.Action) map[string]int {
	out := map[string]int{}
	for _, a := range actions {
		if v := a.GetVerb(); v != "list" && v != "watch" {
			out[v+" "+a.GetResource().Resource]++
		}
	}
	return out
}

// TestEnsureFromCache: a restarted coordinator whose fleet registers again
// with the pod IPs and ports its objects have makes no API call for them
// once Watch's informers have listed; a node with a new pod IP costs one
// update; a write the cache made stale (a conflict, an object deleted
// since) is done again from a fresh read, and ends right.
func TestEnsureFromCache(t *testing.T) {
	const nodes = 100
	ctx := testnet.Ctx(t, 10*time.Second)
	c := newFake(t)
	podIP := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i), 2}) }
	before := newServices(t, c)
	clusterIPs := map[string]netip.Addr{}
	for i := range nodes {
		node := fmt.Sprintf("node-%d", i)
		ip, err := before.Ensure(ctx, node, podIP(i), agentPorts)
		if err != nil {
			t.Fatal(err)
		}
		clusterIPs[node] = ip
	}

	s := newServices(t, c)
	s.Watch(ctx)
	testutil.Eventually(t, 10*time.Second, time.Millisecond, "the informers' first lists", func() bool {
		return s.cache.Load().services.HasSynced() && s.cache.Load().slices.HasSynced()
	})
	c.ClearActions()
	for i := range nodes {
		node := fmt.Sprintf("node-%d", i)
		ip, err := s.Ensure(ctx, node, podIP(i), agentPorts)
		if err != nil || ip != clusterIPs[node] {
			t.Fatalf("Ensure(%s) again = %v, %v; want %v", node, ip, err, clusterIPs[node])
		}
	}
	if calls := apiCalls(c.Actions()); len(calls) != 0 {
		t.Errorf("%d nodes registering again unchanged made API calls %v, want none", nodes, calls)
	}

	// A new pod IP: the slice is updated, nothing read from the API.
	c.ClearActions()
	moved := netip.MustParseAddr("10.244.200.9")
	if _, err := s.Ensure(ctx, "node-0", moved, agentPorts); err != nil {
		t.Fatal(err)
	}
	if calls, want := apiCalls(c.Actions()), map[string]int{"update endpointslices": 1}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("a new pod IP made API calls %v, want %v", calls, want)
	}
	if got := getSlice(t, c, Name("node-0")).Endpoints[0].Addresses[0]; got != moved.String() {
		t.Errorf("node-0's slice points at %s, want %s", got, moved)
	}

	// The Service changed since the cache saw it: the update conflicts,
	// and is done again from a fresh read.
	conflicts := 0
	c.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "services"}, Name("node-1"), fmt.Errorf("the object has been modified"))
	})
	c.ClearActions()
	ports := agentPorts
	ports.Iperf3 = 6201
	if _, err := s.Ensure(ctx, "node-1", podIP(1), ports); err != nil {
		t.Fatalf("Ensure after a conflict: %v", err)
	}
	if calls := apiCalls(c.Actions()); calls["get services"] != 1 || calls["update services"] != 2 {
		t.Errorf("a conflicting update made API calls %v, want a fresh get and a second update of the Service", calls)
	}
	if got := getService(t, c, Name("node-1")).Spec.Ports; !hasPort(got, 6201) {
		t.Errorf("node-1's Service ports %v lack 6201 after the conflict", got)
	}

	// Deleted behind the cache's back: Ensure recreates both.
	if err := c.CoreV1().Services(ns).Delete(ctx, Name("node-2"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.DiscoveryV1().EndpointSlices(ns).Delete(ctx, Name("node-2"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ports.Iperf3 = 6202 // so that the cache, if it still holds them, is wrong and written
	if _, err := s.Ensure(ctx, "node-2", podIP(2), ports); err != nil {
		t.Fatalf("Ensure of a node whose objects were deleted: %v", err)
	}
	if got := getService(t, c, Name("node-2")).Spec.Ports; !hasPort(got, 6202) {
		t.Errorf("node-2's recreated Service ports %v lack 6202", got)
	}
	getSlice(t, c, Name("node-2"))
}

// hasPort reports whether ports has one numbered port.
func hasPort(ports []corev1.ServicePort, port int32) bool {
	return slices.ContainsFunc(ports, func(p corev1.ServicePort) bool { return p.Port == port })
}

// TestPruneLetsEnsureIn: a prune of a departed pool deletes in chunks, so
// a registration that comes while it runs waits for one chunk, not for
// the whole prune; and the objects it creates, listed by no prune, stay.
func TestPruneLetsEnsureIn(t *testing.T) {
	const departed = 100 // 200 objects, 13 chunks
	ctx := testnet.Ctx(t, 10*time.Second)
	c := newFake(t)
	s := newServices(t, c)
	for i := range departed {
		if _, err := s.Ensure(ctx, fmt.Sprintf("gone-%d", i), netip.AddrFrom4([4]byte{10, 244, byte(i), 2}), agentPorts); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		deleted int
	)
	blocked, release := make(chan struct{}), make(chan struct{})
	c.PrependReactor("delete", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		deleted++
		first := deleted == 1
		mu.Unlock()
		if first {
			close(blocked)
			<-release
		}
		return false, nil, nil
	})
	// The deletions done when the registration creates its Service, which
	// it does holding the lock the prune deletes under: counted there, not
	// after Ensure returns, when the prune may have gone on.
	ensured := make(chan int, 1)
	c.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if svc, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Service); ok && svc.Name == Name("new") {
			mu.Lock()
			select {
			case ensured <- deleted:
			default: // the first create counts
			}
			mu.Unlock()
		}
		return false, nil, nil
	})
	pruned := make(chan error, 1)
	go func() { pruned <- s.Prune(ctx, nil) }()
	<-blocked // the first chunk holds the lock
	started := make(chan struct{})
	go func() {
		close(started)
		if _, err := s.Ensure(ctx, "new", netip.MustParseAddr("10.244.250.2"), agentPorts); err != nil {
			t.Error(err)
		}
	}()
	<-started
	// Once it waits for the lock behind the first chunk, that chunk goes on.
	testutil.Eventually(t, 10*time.Second, time.Millisecond, "the registration waiting for the prune's lock", func() bool {
		return waitingIn("kube.(*Services).Ensure", "semaphore.(*Weighted).Acquire")
	})
	close(release)
	if err := <-pruned; err != nil {
		t.Fatal(err)
	}
	if n := <-ensured; n >= 2*departed {
		t.Errorf("the registration created its Service after all %d deletions of the prune, want after a chunk of them", n)
	}
	if svcs, sls := objectNames(t, c); !slices.Equal(svcs, []string{Name("new")}) || !slices.Equal(sls, []string{Name("new")}) {
		t.Errorf("after the prune: services %v, slices %v; want only the new node's", svcs, sls)
	}
}

// BenchmarkEnsureRestartWave: a restarted coordinator's fleet of 5,000
// nodes registering again, unchanged, against the fake API server: the
// API calls per node and the wave's time, without Watch (every Ensure
// reads both objects) and with it, measured in one run. The fake answers
// in microseconds; a real API server takes milliseconds a call and,
// behind the client's rate limit (--kube-qps), far more: the calls are
// what counts.
func BenchmarkEnsureRestartWave(b *testing.B) {
	const nodes = 5000
	ctx := context.Background()
	c := kubetest.NewClientset()
	podIP := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}) }
	names := make([]string, nodes)
	first, err := New(Config{Client: c, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i)
		if _, err := first.Ensure(ctx, names[i], podIP(i), agentPorts); err != nil {
			b.Fatal(err)
		}
	}
	wave := func(s *Services) (calls int, d time.Duration) {
		c.ClearActions()
		start := time.Now()
		for i, n := range names {
			if _, err := s.Ensure(ctx, n, podIP(i), agentPorts); err != nil {
				b.Fatal(err)
			}
		}
		d = time.Since(start)
		for _, n := range apiCalls(c.Actions()) {
			calls += n
		}
		return calls, d
	}
	uncached, err := New(Config{Client: c, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	cached, err := New(Config{Client: c, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cached.Watch(watchCtx)
	for !cached.cache.Load().services.HasSynced() || !cached.cache.Load().slices.HasSynced() {
		time.Sleep(10 * time.Millisecond)
	}
	var callsU, callsC int
	var timeU, timeC time.Duration
	for b.Loop() {
		cu, du := wave(uncached)
		cc, dc := wave(cached)
		callsU, callsC, timeU, timeC = callsU+cu, callsC+cc, timeU+du, timeC+dc
	}
	b.ReportMetric(float64(callsU)/float64(b.N*nodes), "api_calls/node_uncached")
	b.ReportMetric(float64(callsC)/float64(b.N*nodes), "api_calls/node_cached")
	b.ReportMetric(timeU.Seconds()/timeC.Seconds(), "uncached/cached_time")
}

// TestEnsureAfterItsOwnWrites: with a cache that sees no event after its
// first list (a lagging or broken watch), Ensure does not take the cache's
// word for objects it wrote or deleted itself: a node whose objects a
// prune just deleted gets them back, and a registration that undoes
// another's new ports writes them, where the stale cache would have shown
// both as right and nothing would be written.
func TestEnsureAfterItsOwnWrites(t *testing.T) {
	ctx := testnet.Ctx(t, 10*time.Second)
	c := newFake(t)
	pod := netip.MustParseAddr("10.244.1.2")
	if _, err := newServices(t, c).Ensure(ctx, "node-1", pod, agentPorts); err != nil {
		t.Fatal(err)
	}
	c.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil // no event, ever
	})
	s := newServices(t, c)
	s.Watch(ctx)
	testutil.Eventually(t, 10*time.Second, time.Millisecond, "the informers' first lists", func() bool {
		return s.cache.Load().services.HasSynced() && s.cache.Load().slices.HasSynced()
	})

	// Ports changed, then changed back: the second write must happen.
	other := agentPorts
	other.Iperf3 = 6201
	for _, ports := range []protocol.ServerPorts{other, agentPorts} {
		if _, err := s.Ensure(ctx, "node-1", pod, ports); err != nil {
			t.Fatal(err)
		}
		if got := getService(t, c, Name("node-1")).Spec.Ports; !hasPort(got, int32(ports.Iperf3)) {
			t.Errorf("after Ensure with iperf3 port %d the Service has ports %v", ports.Iperf3, got)
		}
	}

	// Pruned, then registering again as it was: both objects come back.
	if err := s.Prune(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if svcs, sls := objectNames(t, c); len(svcs)+len(sls) != 0 {
		t.Fatalf("after the prune: services %v, slices %v", svcs, sls)
	}
	if _, err := s.Ensure(ctx, "node-1", pod, agentPorts); err != nil {
		t.Fatal(err)
	}
	if svcs, sls := objectNames(t, c); !slices.Equal(svcs, []string{Name("node-1")}) || !slices.Equal(sls, []string{Name("node-1")}) {
		t.Errorf("after registering again: services %v, slices %v; want node-1's back", svcs, sls)
	}
}

// waitingIn reports whether a goroutine's stack has both fn, its caller,
// and in, what it waits in (function names as runtime.Stack prints them).
func waitingIn(fn, in string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) && strings.Contains(g, in) {
			return true
		}
	}
	return false
}
