package alert_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/alert"
	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// publisher records what it is given.
type publisher struct {
	mu  sync.Mutex
	got [][]diagnose.Finding
}

func (p *publisher) SetFaults(fs []diagnose.Finding) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, fs)
}

func (p *publisher) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// storeRun stores a run of label over 3 nodes (ping on host-host and
// pod-pod, two samples per pair) where broken(src, dst, path) fails.
func storeRun(t *testing.T, ctx context.Context, st *store.Store, runID, label string, broken func(src, dst string, p measurev1.Path) bool) {
	t.Helper()
	start := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	if err := st.CreateRun(ctx, &measurev1.Run{RunId: runID, Spec: &measurev1.RunSpec{Label: label}, CreateTime: timestamppb.New(start)}); err != nil {
		t.Fatal(err)
	}
	var rs []*measurev1.Result
	for i := 1; i <= 3; i++ {
		for j := 1; j <= 3; j++ {
			if i == j {
				continue
			}
			src, dst := fmt.Sprintf("node-%d", i), fmt.Sprintf("node-%d", j)
			for _, p := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD} {
				for k := range 2 {
					r := &measurev1.Result{
						RunId: runID, TestId: fmt.Sprintf("%s-%s-%v", src, dst, p), Index: uint32(k),
						SrcNode: src, DstNode: dst, Path: p, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
						StartTime: timestamppb.New(start.Add(time.Duration(len(rs)) * time.Second)),
						Status:    measurev1.Status_STATUS_OK,
						Metrics:   &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 100e-6 * (1 + 0.01*float64(k))}},
					}
					if broken != nil && broken(src, dst, p) {
						r.Status, r.Metrics = measurev1.Status_STATUS_TIMEOUT, nil
					}
					rs = append(rs, r)
				}
			}
		}
	}
	if err := st.AddResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
}

func podsOf(node string) func(src, dst string, p measurev1.Path) bool {
	return func(src, dst string, p measurev1.Path) bool {
		return (src == node || dst == node) && p == measurev1.Path_PATH_POD_TO_POD
	}
}

func TestAlerter(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "meshperf.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var logs testutil.SyncBuffer
	pub := &publisher{}
	a := alert.New(alert.Config{Store: st, Publisher: pub, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	steps := []struct {
		name   string
		label  string
		state  measurev1.RunState
		broken func(src, dst string, p measurev1.Path) bool
		// diagnosed: the run is taken into account (continuous, not
		// interrupted); want are then the current findings.
		diagnosed bool
		want      string
		wantLog   string
	}{
		{"clean continuous run", "monitor-light", measurev1.RunState_RUN_STATE_SUCCEEDED, nil, true, "", ""},
		{"pod network broken on node-2", "monitor-light", measurev1.RunState_RUN_STATE_FAILED, podsOf("node-2"), true,
			"node-2 pod-network", `msg="fault localised" node=node-2 kind=pod-network`},
		{"on-demand runs are not judged", "host-gw", measurev1.RunState_RUN_STATE_FAILED, podsOf("node-3"), false, "node-2 pod-network", ""},
		{"interrupted runs are not judged", "monitor-light", measurev1.RunState_RUN_STATE_INTERRUPTED, nil, false, "node-2 pod-network", ""},
		{"canceled runs are not judged", "monitor-light", measurev1.RunState_RUN_STATE_CANCELED, nil, false, "node-2 pod-network", ""},
		{"still broken", "monitor-light", measurev1.RunState_RUN_STATE_FAILED, podsOf("node-2"), true,
			"node-2 pod-network", `msg="fault persists" node=node-2 kind=pod-network`},
		{"another schedule that cannot see it does not clear it", "monitor-hosts", measurev1.RunState_RUN_STATE_SUCCEEDED, nil, true,
			"node-2 pod-network", ""},
		{"repaired", "monitor-light", measurev1.RunState_RUN_STATE_SUCCEEDED, nil, true, "", `msg="fault cleared" node=node-2 kind=pod-network`},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			runID := fmt.Sprintf("run-%d", i)
			storeRun(t, ctx, st, runID, s.label, s.broken)
			before, handled := pub.calls(), a.Handled()
			a.RunEnded(runID, s.state)
			if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool { return a.Handled() > handled }) {
				t.Fatal("the alerter did not deal with the run")
			}
			if got := pub.calls() - before; got != b2i(s.diagnosed) {
				t.Errorf("the publisher was told %d times, want %d", got, b2i(s.diagnosed))
			}
			gotID, fs := a.Current()
			var got []string
			for _, f := range fs {
				got = append(got, fmt.Sprintf("%s %s", f.Node, f.Kind))
			}
			if strings.Join(got, "; ") != s.want {
				t.Errorf("current findings %q (of %v), want %q", got, gotID, s.want)
			}
			if s.wantLog != "" && !strings.Contains(logs.String(), s.wantLog) {
				t.Errorf("log lacks %q:\n%s", s.wantLog, logs.String())
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
