package registry

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// TestRegistrationsOfANodeTakeTurns: a node's second Register, arriving
// while the first is still in its ServiceIPs call (an agent restarting
// while its last Register waits for the API server), waits for the first
// to attach before it calls ServiceIPs. So the calls never overlap, the
// last one carries the second Register's ports, and the node is connected
// and recorded with them: its Service, its session and its record agree.
func TestRegistrationsOfANodeTakeTurns(t *testing.T) {
	var (
		mu       sync.Mutex
		inFlight int
		overlap  bool
		calls    []protocol.ServerPorts
	)
	entered, release := make(chan struct{}), make(chan struct{})
	serviceIPs := func(ctx context.Context, _ string, _ netip.Addr, ports protocol.ServerPorts) (netip.Addr, error) {
		mu.Lock()
		inFlight++
		overlap = overlap || inFlight > 1
		calls = append(calls, ports)
		first := len(calls) == 1
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		if first {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return netip.Addr{}, ctx.Err()
			}
		}
		return netip.MustParseAddr("10.96.0.11"), nil
	}
	r := newRegistry(t, Config{ServiceIPs: serviceIPs})
	older := agentReg("node-1", "10.0.0.1", "10.244.1.2")
	newer := agentReg("node-1", "10.0.0.1", "10.244.1.2")
	newer.Iperf3Port = 6201

	a := dial(t, r, registerMsg(older))
	select {
	case <-entered:
	case <-time.After(waitBound):
		t.Fatal("the first Register never called ServiceIPs")
	}
	b := dial(t, r, registerMsg(newer))
	// The second waits for its turn, or (were it not to) calls ServiceIPs.
	testutil.Eventually(t, waitBound, time.Millisecond, "the second Register in progress", func() bool {
		mu.Lock()
		called := len(calls) == 2
		mu.Unlock()
		r.mu.Lock()
		defer r.mu.Unlock()
		return called || r.registering["node-1"] != nil && r.registering["node-1"].n == 2
	})
	close(release)
	b.next(t, "Registered", func(m *agentv1.ConnectResponse) bool { return m.GetRegistered() != nil })
	mu.Lock()
	overlapped := overlap
	mu.Unlock()
	if overlapped {
		t.Fatal("the second Register called ServiceIPs while the first's call was in flight")
	}
	if err := a.wait(t); !errors.Is(err, ErrReplaced) {
		t.Errorf("the first session's Serve = %v, want ErrReplaced", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[1].Iperf3 != 6201 {
		t.Errorf("ServiceIPs calls = %+v, want two, the last with iperf3 port 6201", calls)
	}
	if n, ok := r.Node("node-1"); !ok || n.Iperf3Port != 6201 {
		t.Errorf("Node(node-1) = %+v, %v; want connected with iperf3 port 6201", n, ok)
	}
	if got := r.Registering(); len(got) != 0 {
		t.Errorf("Registering() = %v after both attached, want none", got)
	}
	// The record (stored, and what ListAgents shows) has the ports too,
	// the defaults in place of the 0s.
	if as := r.Agents(); len(as) != 1 || as[0].GetIperf3Port() != 6201 || as[0].GetQperfPort() != protocol.DefaultQperfPort ||
		as[0].GetQperfDataPort() != protocol.DefaultQperfDataPort {
		t.Errorf("Agents() = %v, want node-1 with iperf3_port 6201 and the default qperf ports", as)
	}
}

// TestMarkRegistering: a registration of a node whose turn is taken waits,
// and gives up with its context's error, uncounted; done ends a turn once,
// however often it is called, and the next registration gets it.
func TestMarkRegistering(t *testing.T) {
	r := newRegistry(t, Config{})
	done, err := r.markRegistering(context.Background(), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.markRegistering(context.Background(), "node-2")
	if err != nil {
		t.Fatalf("node-2 waits for node-1's turn: %v", err)
	}
	if got, want := r.Registering(), []string{"node-1", "node-2"}; !slices.Equal(got, want) {
		t.Errorf("Registering() = %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.markRegistering(ctx, "node-1"); !errors.Is(err, context.Canceled) {
		t.Errorf("a second registration of node-1 with a canceled context: %v, want context.Canceled", err)
	}
	r.mu.Lock()
	n := r.registering["node-1"].n
	r.mu.Unlock()
	if n != 1 {
		t.Errorf("node-1 counts %d registrations after one gave up, want 1", n)
	}
	done()
	done()
	other()
	if got := r.Registering(); len(got) != 0 {
		t.Errorf("Registering() = %v after both ended, want none", got)
	}
	next, err := r.markRegistering(context.Background(), "node-1")
	if err != nil {
		t.Fatalf("node-1's next registration after done: %v", err)
	}
	next()
}

// TestServiceIPRetry: a node whose registration got no ClusterIP (the
// ServiceIPs call failed, as with the API server down) gets it once a
// retry succeeds, while its session lasts: the node, its record and the
// other agents' Endpoints then carry it. A node whose session ended is
// not asked for again.
func TestServiceIPRetry(t *testing.T) {
	clusterIP := netip.MustParseAddr("10.96.0.11")
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	serviceIPs := func(_ context.Context, node string, _ netip.Addr, _ protocol.ServerPorts) (netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[node]++
		switch {
		case node == "node-2":
			return netip.MustParseAddr("10.96.0.12"), nil
		case calls[node] <= 3: // the registration's call and two retries
			return netip.Addr{}, errors.New("the API server is down")
		}
		return clusterIP, nil
	}
	callsOf := func(node string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[node]
	}
	r := newRegistry(t, Config{ServiceIPs: serviceIPs, ServiceIPRetry: time.Millisecond})
	other, _ := connect(t, r, agentReg("node-2", "10.0.0.2", "10.244.2.2"))
	// node-2's Endpoints are built over and over while node-1's ClusterIP
	// arrives, as a session loop does (under -race: no record is edited
	// while it is read).
	r.mu.Lock()
	s2 := r.sessions["node-2"]
	r.mu.Unlock()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				r.endpoints(s2)
			}
		}
	})
	connect(t, r, agentReg("node-1", "10.0.0.1", "10.244.1.2"))
	testutil.Eventually(t, waitBound, time.Millisecond, "node-1's ClusterIP after the retries", func() bool {
		n, ok := r.Node("node-1")
		return ok && n.ServiceIP == clusterIP
	})
	close(stop)
	readers.Wait()
	if got := callsOf("node-1"); got != 4 {
		t.Errorf("%d ServiceIPs calls for node-1, want 4: the failed one, two failed retries and the one that got it", got)
	}
	if got := callsOf("node-2"); got != 1 {
		t.Errorf("%d ServiceIPs calls for node-2, which got its ClusterIP at once, want 1", got)
	}
	for _, a := range r.Agents() {
		if a.GetNodeName() == "node-1" && a.GetServiceIp() != clusterIP.String() {
			t.Errorf("node-1's record has service_ip %q, want %s", a.GetServiceIp(), clusterIP)
		}
	}
	other.next(t, "Endpoints with node-1's ClusterIP", func(m *agentv1.ConnectResponse) bool {
		for _, n := range m.GetEndpoints().GetNodes() {
			if n.GetNodeName() == "node-1" && n.GetServiceIp() == clusterIP.String() {
				return true
			}
		}
		return false
	})
	// Its address is indexed: a node that registers it as its pod IP
	// conflicts.
	if err := r.checkConflicts(Node{Name: "node-3", HostIP: netip.MustParseAddr("10.0.0.3"), PodIP: clusterIP}); !errors.Is(err, ErrBadRegistration) {
		t.Errorf("a node registering node-1's ClusterIP as its pod IP: %v, want ErrBadRegistration", err)
	}
}

// TestServiceIPRetryEndsWithTheSession: the retries of a node whose
// session ended stop; the session's end waits for them.
func TestServiceIPRetryEndsWithTheSession(t *testing.T) {
	var calls atomic.Int64
	serviceIPs := func(context.Context, string, netip.Addr, protocol.ServerPorts) (netip.Addr, error) {
		calls.Add(1)
		return netip.Addr{}, errors.New("the API server is down")
	}
	r := newRegistry(t, Config{ServiceIPs: serviceIPs, ServiceIPRetry: time.Millisecond})
	a, _ := connect(t, r, agentReg("node-1", "10.0.0.1", "10.244.1.2"))
	testutil.Eventually(t, waitBound, time.Millisecond, "a retry", func() bool { return calls.Load() >= 2 })
	a.leave(t) // Serve has returned
	after := calls.Load()
	time.Sleep(50 * time.Millisecond) // many times the first retry waits: a retry left running would call
	if got := calls.Load(); got != after {
		t.Errorf("%d ServiceIPs calls after the session ended, want none", got-after)
	}
}

// hookRecorder keeps the last record stored per node; before storing one
// it calls before (if set), until before reports that it ran.
type hookRecorder struct {
	before func(*storev1.Agent) bool // reports whether it ran
	ran    atomic.Bool               // set with the store of the record before ran for

	mu   sync.Mutex
	last map[string]*storev1.Agent
	done bool // ran, as of last
}

// PutAgent takes a as it is at the call, as a store that encodes its
// argument does, then runs before (once it reported that it ran, no
// more), then keeps the copy: a write that before made lands first.
func (h *hookRecorder) PutAgent(_ context.Context, a *storev1.Agent) error {
	a = proto.CloneOf(a)
	ran := h.before != nil && !h.ran.Load() && h.before(a)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last[a.GetNodeName()] = a
	if ran {
		h.ran.Store(true)
		h.done = true
	}
	return nil
}

func (h *hookRecorder) Agents(context.Context) ([]*storev1.Agent, error) { return nil, nil }

// stored returns the last record of node and whether before had run by
// the time it was stored.
func (h *hookRecorder) stored(node string) (*storev1.Agent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[node], h.done
}

// TestServiceIPRetryKeepsACordon: a node cordoned while the record with
// its new ClusterIP is being written (SetMaintenance's write lands first)
// is stored cordoned and with its ClusterIP: the retry's stale write is
// followed by the current record, not left last.
func TestServiceIPRetryKeepsACordon(t *testing.T) {
	clusterIP := netip.MustParseAddr("10.96.0.11")
	var calls atomic.Int64
	serviceIPs := func(context.Context, string, netip.Addr, protocol.ServerPorts) (netip.Addr, error) {
		if calls.Add(1) == 1 {
			return netip.Addr{}, errors.New("the API server is down")
		}
		return clusterIP, nil
	}
	rec := &hookRecorder{last: map[string]*storev1.Agent{}}
	r, err := New(context.Background(), Config{Recorder: rec, ServiceIPs: serviceIPs, ServiceIPRetry: time.Millisecond,
		HeartbeatInterval: time.Second, HeartbeatTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Shutdown)
	rec.before = func(a *storev1.Agent) bool {
		if a.GetServiceIp() == "" || a.GetMaintenance() {
			return false
		}
		if _, err := r.SetMaintenance(context.Background(), "node-1", true); err != nil {
			t.Error(err)
		}
		return true
	}
	connect(t, r, agentReg("node-1", "10.0.0.1", "10.244.1.2"))
	testutil.Eventually(t, waitBound, time.Millisecond, "node-1 stored with its ClusterIP and cordoned", func() bool {
		a, ran := rec.stored("node-1")
		return ran && a.GetServiceIp() == clusterIP.String() && a.GetMaintenance()
	})
}

// TestRecordWritesRaceACordon: a node cordoned or uncordoned while
// another write of its record is under way (a registration, a
// disconnect; the cordon's write lands first) is stored with the cordon
// and with what the other write changed: the stale write is followed by
// the current record, not left last.
func TestRecordWritesRaceACordon(t *testing.T) {
	tests := []struct {
		name string
		// during says which write of node-1 the cordon races.
		during func(a *storev1.Agent) bool
		// act makes that write happen, given the registry.
		act  func(t *testing.T, r *Registry)
		want func(a *storev1.Agent) bool
	}{
		{
			name:   "registration",
			during: func(a *storev1.Agent) bool { return a.GetConnected() },
			act: func(t *testing.T, r *Registry) {
				connect(t, r, agentReg("node-1", "10.0.0.1", "10.244.1.2"))
			},
			want: func(a *storev1.Agent) bool { return a.GetConnected() && a.GetMaintenance() },
		},
		{
			name:   "disconnect",
			during: func(a *storev1.Agent) bool { return !a.GetConnected() },
			act: func(t *testing.T, r *Registry) {
				a, _ := connect(t, r, agentReg("node-1", "10.0.0.1", "10.244.1.2"))
				a.leave(t)
			},
			want: func(a *storev1.Agent) bool { return !a.GetConnected() && a.GetMaintenance() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &hookRecorder{last: map[string]*storev1.Agent{}}
			r, err := New(context.Background(), Config{Recorder: rec, HeartbeatInterval: time.Second, HeartbeatTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Shutdown)
			rec.before = func(a *storev1.Agent) bool {
				if a.GetNodeName() != "node-1" || a.GetMaintenance() || !tt.during(a) {
					return false
				}
				if _, err := r.SetMaintenance(context.Background(), "node-1", true); err != nil {
					t.Error(err)
				}
				return true
			}
			tt.act(t, r)
			testutil.Eventually(t, waitBound, time.Millisecond, "node-1 stored as the write left it, and cordoned", func() bool {
				a, ran := rec.stored("node-1")
				return ran && tt.want(a)
			})
		})
	}
}
