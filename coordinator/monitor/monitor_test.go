package monitor

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/config"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/store"
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

func TestTickYieldsToRunsInProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	for _, n := range []string{"a", "b"} {
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
	defer mgr.Close()
	settings, err := config.Parse([]byte(`monitor: {light: {interval: 30s, tests: [ping], paths: [host-host], repeats: 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	plans := settings.Plans
	log := slog.New(slog.DiscardHandler)
	r := runsOf{mgr, st}

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
