package runs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

func TestRouteFor(t *testing.T) {
	ip := netip.MustParseAddr
	src := registry.Node{Name: "a", HostIP: ip("172.18.0.11"), PodIP: ip("10.244.1.2")}
	dst := registry.Node{Name: "b", HostIP: ip("172.18.0.12"), PodIP: ip("10.244.2.2"), ServiceIP: ip("10.96.0.12")}
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	tests := []struct {
		path    measurev1.Path
		src     registry.Node
		want    route
		wantErr string
	}{
		{measurev1.Path_PATH_HOST_TO_HOST, src, route{host, host, dst.HostIP}, ""},
		{measurev1.Path_PATH_HOST_TO_POD, src, route{host, pod, dst.PodIP}, ""},
		{measurev1.Path_PATH_POD_TO_POD, src, route{pod, pod, dst.PodIP}, ""},
		{measurev1.Path_PATH_POD_TO_SERVICE, src, route{pod, pod, dst.ServiceIP}, ""},
		{measurev1.Path_PATH_HOST_TO_SERVICE, src, route{host, pod, dst.ServiceIP}, ""},
		{measurev1.Path_PATH_POD_TO_POD, registry.Node{Name: "a", HostIP: src.HostIP}, route{}, `node "a" registered no pod endpoint`},
		{measurev1.Path_PATH_UNSPECIFIED, src, route{}, "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.path.String(), func(t *testing.T) {
			got, err := routeFor(tt.path, measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, tt.src, dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("routeFor = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	noService := dst
	noService.ServiceIP = netip.Addr{}
	if _, err := routeFor(measurev1.Path_PATH_POD_TO_SERVICE, measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, src, noService); err == nil || !strings.Contains(err.Error(), `node "b" registered no address for pod-service`) {
		t.Errorf("missing service IP: err = %v", err)
	}
}

// A run left running by a coordinator that died is interrupted at the next
// start, and GetRun says so.
func TestUnfinishedRunsAreInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := openStore(t)
	for id, state := range map[string]measurev1.RunState{
		"run-running":   measurev1.RunState_RUN_STATE_RUNNING,
		"run-queued":    measurev1.RunState_RUN_STATE_QUEUED,
		"run-succeeded": measurev1.RunState_RUN_STATE_SUCCEEDED,
	} {
		if err := st.PutRun(ctx, &measurev1.Run{RunId: id, State: state}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(ctx, registry.Config{Recorder: st})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ctx, Config{Store: st, Agents: reg, IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for id, want := range map[string]measurev1.RunState{
		"run-running":   measurev1.RunState_RUN_STATE_INTERRUPTED,
		"run-queued":    measurev1.RunState_RUN_STATE_INTERRUPTED,
		"run-succeeded": measurev1.RunState_RUN_STATE_SUCCEEDED,
	} {
		run, err := m.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.GetState() != want {
			t.Errorf("%s: state %v, want %v", id, run.GetState(), want)
		}
	}
	if _, err := m.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(nope) err = %v, want ErrNotFound", err)
	}
	// Watching an ended run gives its state once and ends.
	ch, err := m.Watch(ctx, "run-running")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for u := range ch {
		n++
		if u.Run.GetState() != measurev1.RunState_RUN_STATE_INTERRUPTED {
			t.Errorf("watch state %v", u.Run.GetState())
		}
	}
	if n != 1 {
		t.Errorf("%d updates for an ended run, want 1", n)
	}
}

func TestSanitize(t *testing.T) {
	start := time.Now()
	ping := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	qperf := &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{64, 1024}}}}
	pt := func(spec *measurev1.TestSpec) *measurev1.PlannedTest {
		return &measurev1.PlannedTest{TestId: "t00007", SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_POD_TO_POD, Spec: spec}
	}
	okPing := func() *measurev1.Result {
		return &measurev1.Result{Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.New(start),
			Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 1e-4}}}
	}
	tests := []struct {
		name       string
		pt         *measurev1.PlannedTest
		in         []*measurev1.Result
		wantStatus []measurev1.Status
		wantMsg    string
	}{
		{"good answer kept", pt(ping), []*measurev1.Result{okPing()}, []measurev1.Status{measurev1.Status_STATUS_OK}, ""},
		{"an extra result dropped", pt(ping), []*measurev1.Result{okPing(), okPing()}, []measurev1.Status{measurev1.Status_STATUS_OK}, ""},
		{"more than one extra refused", pt(ping), []*measurev1.Result{okPing(), okPing(), okPing()}, []measurev1.Status{measurev1.Status_STATUS_PARSE_ERROR}, "3 results; at most 2 accepted"},
		{"missing size failed", pt(qperf), []*measurev1.Result{{Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.New(start),
			Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{LatencySeconds: 2e-5}}}},
			[]measurev1.Status{measurev1.Status_STATUS_OK, measurev1.Status_STATUS_PARSE_ERROR}, "1 result(s); 2 expected"},
		{"metrics of another tool", pt(ping), []*measurev1.Result{{Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 1}}}},
			[]measurev1.Status{measurev1.Status_STATUS_PARSE_ERROR}, "Iperf3 metrics for a ping test"},
		{"failure with metrics", pt(ping), []*measurev1.Result{{Status: measurev1.Status_STATUS_REFUSED, Message: "refused",
			Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{}}}},
			[]measurev1.Status{measurev1.Status_STATUS_REFUSED}, "refused"},
		{"no status", pt(ping), []*measurev1.Result{{}}, []measurev1.Status{measurev1.Status_STATUS_PARSE_ERROR}, "without a status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sanitize("run-1", tt.pt, tt.in, start)
			if len(got) != len(tt.wantStatus) {
				t.Fatalf("%d results, want %d", len(got), len(tt.wantStatus))
			}
			for i, r := range got {
				if r.GetStatus() != tt.wantStatus[i] {
					t.Errorf("result %d: status %v (%s), want %v", i, r.GetStatus(), r.GetMessage(), tt.wantStatus[i])
				}
				if r.GetStatus() != measurev1.Status_STATUS_OK && r.GetMetrics() != nil {
					t.Errorf("result %d: failed with metrics", i)
				}
				if r.GetIndex() != uint32(i) || r.GetTestId() != "t00007" || r.GetRunId() != "run-1" || r.GetSrcNode() != "a" ||
					r.GetDstNode() != "b" || r.GetPath() != measurev1.Path_PATH_POD_TO_POD || r.GetStartTime() == nil {
					t.Errorf("result %d: identity not the coordinator's: %v", i, r)
				}
			}
			if tt.wantMsg != "" {
				var msgs []string
				for _, r := range got {
					msgs = append(msgs, r.GetMessage())
				}
				if !strings.Contains(strings.Join(msgs, "|"), tt.wantMsg) {
					t.Errorf("messages %q, want one containing %q", msgs, tt.wantMsg)
				}
			}
		})
	}
}

// testWatchBuffer keeps the watcher tests small.
const testWatchBuffer = 16

// testManager is a Manager over a real store whose registry knows nodes
// a and b (recently seen, not connected): every test fails at once as
// agent_unavailable, which is all these tests need.
func testManager(t *testing.T) (*Manager, *store.Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	st := openStore(t)
	for _, n := range []string{"a", "b"} {
		if err := st.PutAgent(ctx, &storev1.Agent{NodeName: n, LastSeenTime: timestamppb.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(ctx, registry.Config{Recorder: st})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ctx, Config{Store: st, Agents: reg, WatchBuffer: testWatchBuffer, IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, st, ctx
}

func TestLostAgentsFailInTheMesh(t *testing.T) {
	m, _, ctx := testManager(t)
	run, err := m.Trigger(ctx, &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := m.Watch(ctx, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	var last Update
	for u := range ch {
		last = u
	}
	if last.Run.GetState() != measurev1.RunState_RUN_STATE_FAILED || last.Run.GetTestsFailed() != 2 {
		t.Errorf("run %v, want FAILED with 2 failed tests (a->b, b->a)", last.Run)
	}
}

// TestTriggerRecordsOrigin: a run's origin is stored with it, and a
// trigger that names none is refused before anything is stored.
func TestTriggerRecordsOrigin(t *testing.T) {
	m, st, ctx := testManager(t)
	spec := &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}
	for _, origin := range []measurev1.RunOrigin{measurev1.RunOrigin_RUN_ORIGIN_CLIENT, measurev1.RunOrigin_RUN_ORIGIN_MONITOR} {
		run, err := m.Trigger(ctx, spec, origin)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := st.GetRun(ctx, run.GetRunId())
		if err != nil {
			t.Fatal(err)
		}
		if run.GetOrigin() != origin || stored.GetOrigin() != origin {
			t.Errorf("triggered as %v: run's origin %v, stored %v", origin, run.GetOrigin(), stored.GetOrigin())
		}
		ch, err := m.Watch(ctx, run.GetRunId())
		if err != nil {
			t.Fatal(err)
		}
		for range ch { // until the run ended
		}
	}
	before, err := st.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("no origin: error %v, want schedule.ErrInvalid", err)
	}
	if after, err := st.Runs(ctx); err != nil || len(after) != len(before) {
		t.Errorf("no origin: %d runs stored, were %d (%v)", len(after), len(before), err)
	}
}

// TestTriggerDropsUnknownFields: unknown fields of a client's run spec
// and of its test specs (1 MiB of them here) reach neither the stored
// run, nor its planned tests, nor the answer; the caller's spec keeps
// them.
func TestTriggerDropsUnknownFields(t *testing.T) {
	m, st, ctx := testManager(t)
	junk := append([]byte{0xba, 0x3e, 0x80, 0x80, 0x40}, make([]byte, 1<<20)...) // field 999, 1 MiB
	test := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	test.ProtoReflect().SetUnknown(junk)
	spec := &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{test}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}
	spec.ProtoReflect().SetUnknown(junk)
	run, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetRun(ctx, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*measurev1.Run{"answer": run, "stored": stored} {
		if size := proto.Size(r); size > 64<<10 || len(r.GetPlanned()) != 2 {
			t.Errorf("%s run: %d bytes, %d planned tests; want 2 tests, no 1 MiB unknown field in any", name, size, len(r.GetPlanned()))
		}
	}
	if len(spec.ProtoReflect().GetUnknown()) == 0 || len(test.ProtoReflect().GetUnknown()) == 0 {
		t.Error("Trigger dropped the caller's own unknown fields")
	}
	ch, err := m.Watch(ctx, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	for range ch { // until the run ended
	}
}

func TestWatchersAreBounded(t *testing.T) {
	m, _, ctx := testManager(t)
	// More tests than a watcher may fall behind by.
	spec := &measurev1.RunSpec{Repeats: 8, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_HTTP}, {Test: measurev1.Test_TEST_IPERF3_TCP}},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD}}
	run, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	if run.GetTestsPlanned() <= testWatchBuffer {
		t.Fatalf("%d tests planned; the test needs more than %d", run.GetTestsPlanned(), testWatchBuffer)
	}
	slow, err := m.Watch(ctx, run.GetRunId()) // never read until the run ends
	if err != nil {
		t.Fatal(err)
	}
	gone, cancelGone := context.WithCancel(ctx)
	left, err := m.Watch(gone, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	cancelGone() // a client that went away
	for range left {
	} // closed once its context ended, whatever the run does

	for {
		r, err := m.Get(ctx, run.GetRunId())
		if err != nil {
			t.Fatal(err)
		}
		if testspec.RunEnded(r.GetState()) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int
	var lagged bool
	for u := range slow {
		n++
		lagged = lagged || u.Lagged
	}
	if !lagged || n > testWatchBuffer {
		t.Errorf("slow watcher got %d updates, lagged %t; want at most %d and a Lagged one", n, lagged, testWatchBuffer)
	}
}

// A run the coordinator stopped mid-way lists every planned test: those
// that never ran as interrupted.
func TestInterruptedRunHasEveryTest(t *testing.T) {
	m, st, ctx := testManager(t)
	run := &measurev1.Run{RunId: "r-stale", State: measurev1.RunState_RUN_STATE_RUNNING, TestsPlanned: 3, Planned: []*measurev1.PlannedTest{
		{TestId: "t00001", SrcNode: "a", DstNode: "b", Path: 1, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}},
		{TestId: "t00002", SrcNode: "b", DstNode: "a", Path: 1, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}},
		{TestId: "t00003", SrcNode: "a", DstNode: "b", Path: 3, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}},
	}}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	done := &measurev1.Result{TestId: "t00001", RunId: "r-stale", SrcNode: "a", DstNode: "b", Path: 1,
		Spec: run.Planned[0].Spec, Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.Now()}
	if err := st.AddResults(ctx, []*measurev1.Result{done}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	// The next coordinator start.
	m2, err := New(ctx, Config{Store: st, Agents: m.cfg.Agents, IsNotFound: m.cfg.IsNotFound})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	got, _, err := st.ListResults(ctx, store.Filter{RunID: "r-stale"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]measurev1.Status{}
	for _, r := range got {
		statuses[r.GetTestId()] = r.GetStatus()
	}
	want := map[string]measurev1.Status{"t00001": measurev1.Status_STATUS_OK,
		"t00002": measurev1.Status_STATUS_INTERRUPTED, "t00003": measurev1.Status_STATUS_INTERRUPTED}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	r, err := m2.Get(ctx, "r-stale")
	// The header said nothing was done (it may lag the results after a
	// crash): the counters come from the stored results.
	if err != nil || r.GetState() != measurev1.RunState_RUN_STATE_INTERRUPTED || r.GetTestsDone() != 3 || r.GetTestsFailed() != 2 {
		t.Errorf("run %v, %v; want INTERRUPTED with all 3 tests done, the 2 missing ones failed", r, err)
	}
}
