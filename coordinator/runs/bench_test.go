package runs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/coordinator/store"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// BenchmarkLightMesh runs on-demand ping meshes of 100 nodes (9,900
// tests) against agents that answer at once, in this process, on a real
// store: what the coordinator's dispatch costs per test without gRPC
// (ms/test; ns/op is per run). `meshlab bench-scale --on-demand` measures
// the same over gRPC against a fleet in another process.
func BenchmarkLightMesh(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st := openStore(b)
	ended := make(chan measurev1.RunState, 1)
	m, err := New(ctx, Config{Store: st, Agents: newInstantAgents(100), Observer: endObserver(ended), IsNotFound: storeNotFound})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	spec := &measurev1.RunSpec{Repeats: 1, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}}
	tests := 0
	b.ResetTimer()
	for range b.N {
		run, err := m.Trigger(ctx, spec, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
		if err != nil {
			b.Fatal(err)
		}
		if state := <-ended; state != measurev1.RunState_RUN_STATE_SUCCEEDED {
			b.Fatalf("run %s ended %v", run.GetRunId(), state)
		}
		tests += int(run.GetTestsPlanned())
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(tests), "ms/test")
}

// A light mesh acknowledges each client's answer only once its results
// are in the store, with a stored header that counts them; no node takes
// part in more light tests at once than the Gate allows; and the run ends
// with every test stored once.
func TestLightMeshStoresBeforeAck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := openStore(t)
	agents := newInstantAgents(12)
	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		failed []string
	)
	agents.onAck = func(node string, ids []string) {
		for _, id := range ids {
			runID, testID, _ := strings.Cut(id, "/")
			res, _, err := st.ListResults(ctx, store.Filter{RunID: runID}, 0, "")
			stored := false
			for _, r := range res {
				stored = stored || r.GetTestId() == testID && r.GetSrcNode() == node
			}
			hdr, herr := st.GetRun(ctx, runID)
			mu.Lock()
			switch {
			case err != nil || herr != nil:
				failed = append(failed, fmt.Sprintf("%s: read the store: %v %v", id, err, herr))
			case !stored:
				failed = append(failed, id+": acknowledged before its result was stored")
			case int(hdr.GetTestsDone()) < len(res):
				failed = append(failed, fmt.Sprintf("%s: stored header counts %d tests done, %d results stored", id, hdr.GetTestsDone(), len(res)))
			case acked[id]:
				failed = append(failed, id+": acknowledged twice")
			}
			acked[id] = true
			mu.Unlock()
		}
	}
	ended := make(chan measurev1.RunState, 1)
	gate := schedule.NewGate(3)
	m, err := New(ctx, Config{Store: st, Agents: agents, Gate: gate, Observer: endObserver(ended),
		IsNotFound: storeNotFound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run, err := m.Trigger(ctx, &measurev1.RunSpec{Repeats: 2, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}}, measurev1.RunOrigin_RUN_ORIGIN_CLIENT)
	if err != nil {
		t.Fatal(err)
	}
	if state := <-ended; state != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Fatalf("run ended %v", state)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range failed {
		t.Error(f)
	}
	planned := int(run.GetTestsPlanned())
	if len(acked) != planned {
		t.Errorf("%d answers acknowledged, %d tests planned", len(acked), planned)
	}
	if agents.peak > gate.MaxLight() {
		t.Errorf("a node took part in %d light tests at once; the gate allows %d", agents.peak, gate.MaxLight())
	}
	res, _, err := st.ListResults(ctx, store.Filter{RunID: run.GetRunId()}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetRun(ctx, run.GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != planned || int(stored.GetTestsDone()) != planned || stored.GetState() != measurev1.RunState_RUN_STATE_SUCCEEDED {
		t.Errorf("stored %d results and run %v; want %d tests done, succeeded", len(res), stored, planned)
	}
}
