package store

import (
	"slices"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The records of client work in flight survive a reopen, go when a real
// result of their test is recorded (not a placeholder), with their run,
// or when too old.
func TestDispatched(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, path := openTemp(t)
	for _, d := range []struct {
		id, node string
		at       time.Time
	}{{"r1/t00001", "a", t0}, {"r1/t00002", "a", t0}, {"r1/t00003", "b", t0}, {"r10/t00001", "c", t0}, {"r2/t00001", "a", t0.Add(-8 * 24 * time.Hour)}} {
		if err := s.PutDispatched(ctx, d.id, d.node, d.at); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutDispatched(ctx, "", "a", t0); err == nil {
		t.Error("PutDispatched accepted an empty work ID")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	held := func() []string {
		t.Helper()
		var out []string
		for _, id := range []string{"r1/t00001", "r1/t00002", "r1/t00003", "r10/t00001", "r2/t00001"} {
			node, at, ok, err := s.Dispatched(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				out = append(out, id+"@"+node)
				if at.IsZero() {
					t.Errorf("%s: no dispatch time", id)
				}
			}
		}
		return out
	}
	if got, want := held(), []string{"r1/t00001@a", "r1/t00002@a", "r1/t00003@b", "r10/t00001@c", "r2/t00001@a"}; !slices.Equal(got, want) {
		t.Fatalf("after reopen: %q, want %q", got, want)
	}
	// A placeholder keeps the record; a real result ends it.
	placeholder := sample(interrupted, 0, "placeholder", 0)
	result := sample(ok, 0, "answer", 0)
	result.TestId = "t00002"
	run := &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING}
	if err := s.RecordResults(ctx, run, []*measurev1.Result{placeholder, result}); err != nil {
		t.Fatal(err)
	}
	if got, want := held(), []string{"r1/t00001@a", "r1/t00003@b", "r10/t00001@c", "r2/t00001@a"}; !slices.Equal(got, want) {
		t.Errorf("after RecordResults: %q, want %q", got, want)
	}
	if n, err := s.PruneDispatched(ctx, t0.Add(-7*24*time.Hour)); err != nil || n != 1 {
		t.Errorf("PruneDispatched: %d, %v; want the 1 old record", n, err)
	}
	if n, err := s.DeleteRunDispatched(ctx, "r1"); err != nil || n != 2 {
		t.Errorf("DeleteRunDispatched(r1): %d, %v; want 2 (not r10's)", n, err)
	}
	if err := s.DeleteDispatched(ctx, "r10/t00001"); err != nil {
		t.Fatal(err)
	}
	if got := held(); len(got) != 0 {
		t.Errorf("left: %q", got)
	}
}
