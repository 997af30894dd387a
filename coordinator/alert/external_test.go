package alert_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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

// storeExternal adds to runID the ping results of node-1..node-3 to each
// of targets on both external paths, two samples each, failing where
// broken(src, target, path) holds.
func storeExternal(t *testing.T, ctx context.Context, st *store.Store, runID string, targets []string, broken func(src, target string, p measurev1.Path) bool) {
	t.Helper()
	start := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	var rs []*measurev1.Result
	for i := 1; i <= 3; i++ {
		src := fmt.Sprintf("node-%d", i)
		for _, target := range targets {
			for _, p := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL} {
				for k := range 2 {
					r := &measurev1.Result{
						RunId: runID, TestId: fmt.Sprintf("%s-%s-%v", src, target, p), Index: uint32(k),
						SrcNode: src, DstNode: target, Path: p, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
						StartTime: timestamppb.New(start.Add(time.Duration(len(rs)) * time.Second)),
						Status:    measurev1.Status_STATUS_OK,
						Metrics:   &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 2e-3}},
					}
					if broken != nil && broken(src, target, p) {
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

// targetDown fails every test to the named targets.
func targetDown(names ...string) func(src, target string, p measurev1.Path) bool {
	return func(_, target string, _ measurev1.Path) bool {
		for _, n := range names {
			if target == n {
				return true
			}
		}
		return false
	}
}

// A finding about an external target, or about a node's egress, is
// raised, persists and clears like a node's; it is logged with target= (or
// targets=), and is keyed apart from node findings and other targets'.
func TestAlerterExternal(t *testing.T) {
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

	targets := []string{"ingress", "other-cluster"}
	const localised, persists, cleared = `msg="fault localised" `, `msg="fault persists" `, `msg="fault cleared" `
	steps := []struct {
		name   string
		mesh   func(src, dst string, p measurev1.Path) bool
		ext    func(src, target string, p measurev1.Path) bool
		want   string
		logs   []string // in this step's log lines
		noLogs []string // not in them
	}{
		{"all well", nil, nil, "", nil, []string{"fault"}},
		{"both targets down", nil, targetDown("ingress", "other-cluster"),
			"target ingress external-down; target other-cluster external-down",
			[]string{localised + "target=ingress kind=external-down", localised + "target=other-cluster kind=external-down",
				"sources=node-1,node-2,node-3"},
			[]string{"node="}},
		{"one target back, a node fault appears", podsOf("node-2"), targetDown("other-cluster"),
			"node-2 pod-network; target other-cluster external-down",
			[]string{cleared + "target=ingress kind=external-down", persists + "target=other-cluster kind=external-down",
				localised + "node=node-2 kind=pod-network"},
			[]string{cleared + "target=other-cluster"}},
		{"target back, node-3 cannot leave", podsOf("node-2"), func(src, _ string, _ measurev1.Path) bool { return src == "node-3" },
			"node-2 pod-network; node-3 egress-broken",
			[]string{cleared + "target=other-cluster kind=external-down", persists + "node=node-2 kind=pod-network",
				localised + "node=node-3 kind=egress-broken", "targets=ingress,other-cluster"},
			[]string{cleared + "node=node-2"}},
		{"repaired", nil, nil, "",
			[]string{cleared + "node=node-2 kind=pod-network", cleared + "node=node-3 kind=egress-broken"},
			[]string{localised, persists}},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			runID := fmt.Sprintf("run-x-%d", i)
			storeRun(t, ctx, st, runID, "monitor-light", s.mesh)
			storeExternal(t, ctx, st, runID, targets, s.ext)
			before, handled, logged := pub.calls(), a.Handled(), len(logs.String())
			a.RunEnded(runID, measurev1.RunState_RUN_STATE_SUCCEEDED)
			if !testutil.Within(30*time.Second, 10*time.Millisecond, func() bool { return a.Handled() > handled }) {
				t.Fatal("the alerter did not deal with the run")
			}
			if pub.calls() != before+1 {
				t.Errorf("the publisher was told %d times, want 1", pub.calls()-before)
			}
			_, fs := a.Current()
			var got []string
			for _, f := range fs {
				if f.Target != "" {
					got = append(got, fmt.Sprintf("target %s %s", f.Target, f.Kind))
				} else {
					got = append(got, fmt.Sprintf("%s %s", f.Node, f.Kind))
				}
			}
			if strings.Join(got, "; ") != s.want {
				t.Errorf("current findings %q, want %q", got, s.want)
			}
			if last := pub.last(); describe(last) != describe(fs) {
				t.Errorf("published %v, want the current findings %v", describe(last), describe(fs))
			}
			step := logs.String()[logged:]
			for _, w := range s.logs {
				if !strings.Contains(step, w) {
					t.Errorf("log lacks %q:\n%s", w, step)
				}
			}
			for _, w := range s.noLogs {
				if strings.Contains(step, w) {
					t.Errorf("log has %q:\n%s", w, step)
				}
			}
		})
	}
}

func (p *publisher) last() []diagnose.Finding {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) == 0 {
		return nil
	}
	return p.got[len(p.got)-1]
}

func describe(fs []diagnose.Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return strings.Join(out, "\n")
}
