package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/config"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

func TestNextStaysWithinJitter(t *testing.T) {
	p := config.Plan{Interval: 30 * time.Second, Jitter: 5 * time.Second}
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		d := Next(p)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 25*time.Second || hi > 35*time.Second {
		t.Errorf("ticks in [%v, %v], want within [25s, 35s]", lo, hi)
	}
	if hi-lo < 5*time.Second {
		t.Errorf("ticks in [%v, %v]: no jitter to speak of", lo, hi)
	}
	if d := Next(config.Plan{Interval: time.Minute}); d != time.Minute {
		t.Errorf("no jitter: %v, want 1m", d)
	}
}

// runsOf joins the real run manager (Trigger) and the real store (Runs).
type runsOf struct {
	*runs.Manager
	*store.Store
}

// newRuns opens a store in a temporary directory with nodes known (their
// agents never connect: a run's tests end agent_unavailable at once) and
// a run manager on it, both closed with the test.
func newRuns(ctx context.Context, t *testing.T, nodes ...string) runsOf {
	t.Helper()
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, n := range nodes {
		if err := st.PutAgent(ctx, &storev1.Agent{NodeName: n, LastSeenTime: timestamppb.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(ctx, registry.Config{Recorder: st})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := runs.New(ctx, runs.Config{Store: st, Agents: reg, IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return runsOf{mgr, st}
}

func TestTickYieldsToRunsInProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRuns(ctx, t, "a", "b")
	st := r.Store
	settings, err := config.Parse([]byte(`monitor: {light: {interval: 30s, tests: [ping], paths: [host-host], repeats: 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	plans := settings.Plans
	log := slog.New(slog.DiscardHandler)

	// An operator's run in progress: the tick yields.
	if err := st.CreateRun(ctx, &measurev1.Run{RunId: "00ONDEMAND", State: measurev1.RunState_RUN_STATE_RUNNING}); err != nil {
		t.Fatal(err)
	}
	if Tick(ctx, plans[0], r, log) {
		t.Error("a tick started a run while another was in progress")
	}
	if err := st.PutRun(ctx, &measurev1.Run{RunId: "00ONDEMAND", State: measurev1.RunState_RUN_STATE_SUCCEEDED}); err != nil {
		t.Fatal(err)
	}
	if !Tick(ctx, plans[0], r, log) {
		t.Fatal("a tick started no run on an idle coordinator")
	}
	recent, _, err := st.ListRuns(ctx, 1, "")
	if err != nil || len(recent) != 1 || recent[0].GetSpec().GetLabel() != "monitor-light" || recent[0].GetOrigin() != measurev1.RunOrigin_RUN_ORIGIN_MONITOR {
		t.Errorf("newest run %v, %v; want a monitor-light run of origin RUN_ORIGIN_MONITOR", recent, err)
	}
}

// TestTickTurnsTheMeshRounds: a plan of mesh rounds starts each run where
// the newest run of its label ended, so its runs take the mesh's rounds
// in turn (6 nodes: 10 rounds), found in the store (a restarted
// coordinator goes on where the last one was).
func TestTickTurnsTheMeshRounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRuns(ctx, t, "a", "b", "c", "d", "e", "f")
	st, mgr := r.Store, r.Manager
	settings, err := config.Parse([]byte(`monitor: {bandwidth: {interval: 1h, tests: [iperf3_tcp], paths: [host-host], mesh_rounds: 4}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan := settings.Plans[0]
	for i, want := range []uint32{0, 4, 8, 2, 6} {
		// The runs' agents are not connected: each ends at once, its
		// tests agent_unavailable.
		testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, "the previous run ends", func() bool { return len(mgr.Active()) == 0 })
		if !Tick(ctx, plan, r, slog.New(slog.DiscardHandler)) {
			t.Fatalf("tick %d started no run", i)
		}
		run, err := st.NewestRun(ctx, "monitor-bandwidth")
		if err != nil {
			t.Fatal(err)
		}
		if got := run.GetSpec().GetFirstMeshRound(); got != want || run.GetMeshRounds() != 4 || run.GetMeshRoundCount() != 10 || run.GetTestsPlanned() != 12 {
			t.Errorf("run %d: rounds %d from %d of %d, %d tests; want 4 from %d of 10, 12 tests",
				i, run.GetMeshRounds(), got, run.GetMeshRoundCount(), run.GetTestsPlanned(), want)
		}
	}
}

// TestTickRetriesInterruptedRounds: after a run of mesh rounds that was
// interrupted (a coordinator restart) or canceled, the plan's next run
// measures the same rounds again rather than leaving them for a whole
// turn of the mesh.
func TestTickRetriesInterruptedRounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRuns(ctx, t, "a", "b", "c", "d", "e", "f")
	settings, err := config.Parse([]byte(`monitor: {bandwidth: {interval: 1h, tests: [iperf3_tcp], paths: [host-host], mesh_rounds: 4}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan := settings.Plans[0]
	for i, state := range []measurev1.RunState{measurev1.RunState_RUN_STATE_INTERRUPTED, measurev1.RunState_RUN_STATE_CANCELED} {
		id := fmt.Sprintf("7ZZSTOPPED%d", i) // after every ULID of today: the newest
		stopped := &measurev1.Run{RunId: id, State: state, MeshRounds: 4, MeshRoundCount: 10,
			Spec: &measurev1.RunSpec{Label: "monitor-bandwidth", MeshRounds: 4, FirstMeshRound: 8}}
		if err := r.CreateRun(ctx, stopped); err != nil {
			t.Fatal(err)
		}
		before, err := r.Runs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !Tick(ctx, plan, r, slog.New(slog.DiscardHandler)) {
			t.Fatalf("%v: the tick started no run", state)
		}
		after, err := r.Runs(ctx)
		if err != nil || len(after) != len(before)+1 {
			t.Fatalf("%d runs after the tick, %d before, %v", len(after), len(before), err)
		}
		// Runs are oldest first by ID; the tick's (a ULID of today) sorts
		// before the stopped ones.
		var started *measurev1.Run
		for _, run := range after {
			if !slices.ContainsFunc(before, func(b *measurev1.Run) bool { return b.GetRunId() == run.GetRunId() }) {
				started = run
			}
		}
		if got := started.GetSpec().GetFirstMeshRound(); got != 8 {
			t.Errorf("after a run %v at rounds 8..11: the next starts at %d, want 8 again", state, got)
		}
		testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, "the run ends", func() bool { return len(r.Active()) == 0 })
	}
}
