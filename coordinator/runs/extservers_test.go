package runs

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// serverAgents are connected agents whose clients to an external
// target's server take a few milliseconds; each target's server answers
// busy to a second client at once, and to the first attempt of every test
// (another client, outside meshperf, was there).
type serverAgents struct {
	nodes   []string
	targets map[string]*measurev1.ExternalTarget

	mu       sync.Mutex
	clients  map[string]int  // clients at each target now
	overlaps int             // clients that found another one at their target
	attempts map[string]int  // attempts per work ID
	bad      []string        // client work that broke the contract
	heavy    map[string]bool // nodes with a heavy client now
	// alwaysBusy names targets whose server is always busy.
	alwaysBusy map[string]bool
}

func (a *serverAgents) Known() (mesh, targetable []string) { return a.nodes, a.nodes }
func (a *serverAgents) Node(name string) (registry.Node, bool) {
	for i, n := range a.nodes {
		if n == name {
			return registry.Node{Name: n, HostIP: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}),
				PodIP: netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 2})}, true
		}
	}
	return registry.Node{}, false
}
func (a *serverAgents) GossipGone(string) ([]string, bool)                { return nil, false }
func (a *serverAgents) Send(context.Context, string, *agentv1.Work) error { return nil }
func (a *serverAgents) Ack(string, ...string)                             {}
func (a *serverAgents) HandleLate(registry.LateHandler)                   {}

func (a *serverAgents) Dispatch(ctx context.Context, node string, w *agentv1.Work) (*agentv1.WorkResult, error) {
	rc := w.GetRunClient()
	spec := rc.GetSpec()
	target := a.targets[rc.GetExternalTarget()]
	answer := func(r *measurev1.Result) (*agentv1.WorkResult, error) {
		r.Spec, r.StartTime, r.TargetAddress = spec, timestamppb.Now(), target.GetAddress()
		if r.Elapsed == nil {
			r.Elapsed = durationpb.New(0)
		}
		return &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: r.GetStatus(),
			Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{r}}}}, nil
	}
	if target == nil {
		a.note("%s: client work %s to no external target: %v", node, w.GetWorkId(), rc)
		return answer(&measurev1.Result{Status: measurev1.Status_STATUS_INVALID})
	}
	if !testspec.IsHeavy(spec.GetTest()) {
		med := 1e-3
		return answer(&measurev1.Result{Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
			PacketsTransmitted: 5, PacketsReceived: 5, RttMinSeconds: med, RttAvgSeconds: med, RttMaxSeconds: med, RttMedianSeconds: &med}}})
	}
	wantPort, wantData := target.GetIperf3Port(), uint32(0)
	if testspec.Tool(spec.GetTest()) == measurev1.Tool_TOOL_QPERF {
		wantPort, wantData = target.GetQperfPort(), target.GetQperfDataPort()
	}
	if rc.GetPort() != wantPort || rc.GetDataPort() != wantData || rc.GetTargetIp() != "" {
		a.note("%s: %s to %s with port %d data_port %d target_ip %q, want %d %d", node, w.GetWorkId(), target.GetName(),
			rc.GetPort(), rc.GetDataPort(), rc.GetTargetIp(), wantPort, wantData)
	}
	a.mu.Lock()
	a.attempts[w.GetWorkId()]++
	first := a.attempts[w.GetWorkId()] == 1
	busy := a.clients[target.GetName()] > 0
	if busy {
		a.overlaps++
	}
	if a.heavy[node] {
		a.bad = append(a.bad, fmt.Sprintf("%s: two heavy clients at once", node))
	}
	a.clients[target.GetName()]++
	a.heavy[node] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.clients[target.GetName()]--
		a.heavy[node] = false
		a.mu.Unlock()
	}()
	if busy || first || a.alwaysBusy[target.GetName()] {
		return answer(&measurev1.Result{Status: measurev1.Status_STATUS_BUSY, Message: "the server is busy running a test. try again later"})
	}
	select {
	case <-time.After(5 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if testspec.Tool(spec.GetTest()) == measurev1.Tool_TOOL_QPERF {
		return answer(&measurev1.Result{Status: measurev1.Status_STATUS_OK, Elapsed: durationpb.New(time.Second),
			Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{ThroughputBps: 9e9, MsgSizeBytes: 65536, DurationSeconds: 1}}})
	}
	return answer(&measurev1.Result{Status: measurev1.Status_STATUS_OK, Elapsed: durationpb.New(time.Second),
		Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 9e9, SenderThroughputBps: 9e9, DurationSeconds: 1}}})
}

func (a *serverAgents) note(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bad = append(a.bad, fmt.Sprintf(format, args...))
}

// Two runs at once measure iperf3 and qperf to two external servers from
// every node: every test gets one OK result after its busy first attempt
// (retried, never stored), the clients carry the allowlisted ports, and no
// client ever finds another at its target: one at a time per server over
// both runs, and no node runs two heavy clients at once.
func TestExternalServersOneClientAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := openStore(t)
	allow := []*measurev1.ExternalTarget{
		{Name: "srv", Address: "192.0.2.21", Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766},
		{Name: "v3", Address: "192.0.2.22", Iperf3Port: 15201},
		{Name: "bare", Address: "192.0.2.23"},
	}
	agents := &serverAgents{nodes: []string{"n1", "n2", "n3"}, targets: map[string]*measurev1.ExternalTarget{},
		clients: map[string]int{}, attempts: map[string]int{}, heavy: map[string]bool{}}
	for _, e := range allow {
		agents.targets[e.GetName()] = e
	}
	ended := make(chan measurev1.RunState, 2)
	m, err := New(ctx, Config{Store: st, Agents: agents, Gate: schedule.NewGate(0), Observer: endObserver(ended), ExternalTargets: allow,
		IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.extBackoff = time.Millisecond
	spec := &measurev1.RunSpec{Repeats: 1, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL},
		ExternalTargets: []string{"srv", "v3", "bare"}, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING},
			{Test: measurev1.Test_TEST_IPERF3_TCP}, {Test: measurev1.Test_TEST_QPERF_TCP_BW}}}
	var runs []*measurev1.Run
	for range 2 {
		run, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for range runs {
		if state := <-ended; state != measurev1.RunState_RUN_STATE_SUCCEEDED {
			t.Errorf("run ended %v", state)
		}
	}
	agents.mu.Lock()
	defer agents.mu.Unlock()
	for _, b := range agents.bad {
		t.Error(b)
	}
	if agents.overlaps != 0 {
		t.Errorf("%d clients found another client at their external server", agents.overlaps)
	}
	for _, run := range runs {
		res, _, err := st.ListResults(ctx, store.Filter{RunID: run.GetRunId()}, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, r := range res {
			if r.GetStatus() != measurev1.Status_STATUS_OK {
				t.Errorf("%s %s -> %s %v: %v %s", r.GetTestId(), r.GetSrcNode(), r.GetDstNode(), r.GetSpec().GetTest(), r.GetStatus(), r.GetMessage())
			}
			got[r.GetDstNode()+" "+testspec.Name(r.GetSpec().GetTest())]++
		}
		// 3 nodes x 2 paths; ping to all, iperf3 to srv and v3, qperf to srv.
		want := map[string]int{"bare ping": 6, "srv ping": 6, "v3 ping": 6, "srv iperf3_tcp": 6, "v3 iperf3_tcp": 6, "srv qperf_tcp_bw": 6}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("run %s stored %v, want %v", run.GetRunId(), got, want)
		}
	}
}

// A server that stays busy is retried a bounded number of times, then the
// test ends STATUS_BUSY without metrics: never a sample.
func TestExternalServerAlwaysBusy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := openStore(t)
	allow := []*measurev1.ExternalTarget{{Name: "taken", Address: "192.0.2.24", Iperf3Port: 5201}}
	agents := &serverAgents{nodes: []string{"n1"}, targets: map[string]*measurev1.ExternalTarget{"taken": allow[0]},
		clients: map[string]int{}, attempts: map[string]int{}, heavy: map[string]bool{}, alwaysBusy: map[string]bool{"taken": true}}
	ended := make(chan measurev1.RunState, 1)
	m, err := New(ctx, Config{Store: st, Agents: agents, Observer: endObserver(ended), ExternalTargets: allow,
		IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.extBackoff = time.Millisecond
	run, err := m.Trigger(ctx, &measurev1.RunSpec{Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL},
		ExternalTargets: []string{"taken"}, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_IPERF3_TCP}}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	if state := <-ended; state != measurev1.RunState_RUN_STATE_FAILED {
		t.Errorf("run ended %v, want failed", state)
	}
	res, _, err := st.ListResults(ctx, store.Filter{RunID: run.GetRunId()}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].GetStatus() != measurev1.Status_STATUS_BUSY || res[0].GetMetrics() != nil {
		t.Errorf("results %v, want one STATUS_BUSY without metrics", res)
	}
	agents.mu.Lock()
	defer agents.mu.Unlock()
	for id, n := range agents.attempts {
		if n != externalBusyRetries+1 {
			t.Errorf("%s: %d attempts, want %d", id, n, externalBusyRetries+1)
		}
	}
}
