package monitor

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    int // plans
		wantErr string
	}{
		{"both schedules", `
monitor:
  light: {interval: 30s, jitter: 5s, tests: [ping, qperf_tcp_lat], paths: [host-host, pod-pod], duration: 1s}
  bandwidth: {interval: 6h, tests: [iperf3_tcp, qperf_tcp_bw], sweep: true}
`, 2, ""},
		{"none", `monitor: {}`, 0, ""},
		{"typo is refused", `monitor: {light: {interval: 30s, tests: [ping], jiter: 1s}}`, 0, `unknown field "jiter"`},
		{"interval too short", `monitor: {light: {interval: 1s, tests: [ping]}}`, 0, `monitor.light.interval "1s"`},
		{"jitter too large", `monitor: {light: {interval: 30s, jitter: 20s, tests: [ping]}}`, 0, `monitor.light.jitter "20s"`},
		{"unknown test", `monitor: {bandwidth: {interval: 1h, tests: [iperf2]}}`, 0, "monitor.bandwidth.tests[0]"},
		{"bad duration", `monitor: {bandwidth: {interval: 1h, tests: [iperf3_tcp], duration: 1.5s}}`, 0, "monitor.bandwidth.tests[0] iperf3_tcp"},
		{"no tests", `monitor: {light: {interval: 1m}}`, 0, "monitor.light.tests: empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settings, err := Parse([]byte(tt.yaml))
			plans := settings.Plans
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(plans) != tt.want {
				t.Fatalf("%d plans, want %d", len(plans), tt.want)
			}
		})
	}
	settings, _ := Parse([]byte(tests[0].yaml))
	light, bw := settings.Plans[0], settings.Plans[1]
	if light.Interval != 30*time.Second || light.Jitter != 5*time.Second || light.Spec.GetLabel() != "monitor-light" || len(light.Spec.GetPaths()) != 2 {
		t.Errorf("light plan %+v", light)
	}
	if got := len(bw.Spec.GetTests()[1].GetQperf().GetMsgSizeBytes()); got != 11 || bw.Jitter != time.Hour {
		t.Errorf("bandwidth plan: %d sweep sizes (want 11), jitter %v (want 1h, a sixth of 6h)", got, bw.Jitter)
	}
}

func TestNextStaysWithinJitter(t *testing.T) {
	p := Plan{Interval: 30 * time.Second, Jitter: 5 * time.Second}
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
	if d := Next(Plan{Interval: time.Minute}); d != time.Minute {
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
		if err := st.PutAgent(ctx, &meshv1.Agent{NodeName: n, LastSeenTime: timestamppb.Now()}); err != nil {
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
	settings, err := Parse([]byte(`monitor: {light: {interval: 30s, tests: [ping], paths: [host-host], repeats: 1}}`))
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
	if err != nil || len(recent) != 1 || recent[0].GetSpec().GetLabel() != "monitor-light" {
		t.Errorf("newest run %v, %v; want a monitor-light run", recent, err)
	}
}

// The example shipped in deploy/config parses.
func TestExampleConfig(t *testing.T) {
	settings, err := Load(filepath.Join("..", "..", "deploy", "config", "coordinator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(settings.Plans) != 1 || settings.Plans[0].Name != "bandwidth" {
		t.Errorf("%d plans, want bandwidth only (the continuous latency mesh is the probes)", len(settings.Plans))
	}
	if settings.Probes == nil || len(settings.Probes.GetKinds()) != 4 {
		t.Errorf("probes %v, want the four kinds", settings.Probes)
	}
}
