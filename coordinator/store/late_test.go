package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	ok          = measurev1.Status_STATUS_OK
	interrupted = measurev1.Status_STATUS_INTERRUPTED
	timeout     = measurev1.Status_STATUS_TIMEOUT
)

// sample is one result of test t00001 of run r1 (a->b) with a status, an
// index, a message telling writes apart and a start time offset.
func sample(status measurev1.Status, index uint32, msg string, at time.Duration) *measurev1.Result {
	r := result("r1", "t00001", "a", "b", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING, t0.Add(at))
	r.Status, r.Index, r.Message = status, index, msg
	return r
}

// stored lists r1's stored results as "index:status:message", in index
// order.
func stored(t *testing.T, s *Store) []string {
	t.Helper()
	got, _, err := s.ListResults(testnet.Ctx(t, 10*time.Second), Filter{RunID: "r1"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range got {
		out = append(out, fmt.Sprintf("%d:%v:%s", r.GetIndex(), r.GetStatus(), r.GetMessage()))
	}
	slices.Sort(out)
	return out
}

// Each sample (run, test, index) is stored once: a later result only
// replaces a STATUS_INTERRUPTED placeholder.
func TestAddResultsStoresEachSampleOnce(t *testing.T) {
	tests := []struct {
		name   string
		writes [][]*measurev1.Result // one AddResults call each
		want   []string
	}{
		{"resend of a real result is a no-op", [][]*measurev1.Result{
			{sample(ok, 0, "first", 0)}, {sample(ok, 0, "resend", time.Second)},
		}, []string{"0:STATUS_OK:first"}},
		{"resend with the same key is a no-op", [][]*measurev1.Result{
			{sample(ok, 0, "first", 0)}, {sample(ok, 0, "resend", 0)},
		}, []string{"0:STATUS_OK:first"}},
		{"a failure does not replace a real result", [][]*measurev1.Result{
			{sample(ok, 0, "first", 0)}, {sample(timeout, 0, "late timeout", time.Second)},
		}, []string{"0:STATUS_OK:first"}},
		{"a real result replaces a placeholder", [][]*measurev1.Result{
			{sample(interrupted, 0, "placeholder", time.Hour)}, {sample(ok, 0, "late", time.Second)},
		}, []string{"0:STATUS_OK:late"}},
		{"a placeholder does not replace a real result", [][]*measurev1.Result{
			{sample(ok, 0, "first", 0)}, {sample(interrupted, 0, "placeholder", time.Hour)},
		}, []string{"0:STATUS_OK:first"}},
		{"a placeholder does not replace a placeholder", [][]*measurev1.Result{
			{sample(interrupted, 0, "first", 0)}, {sample(interrupted, 0, "second", time.Hour)},
		}, []string{"0:STATUS_INTERRUPTED:first"}},
		{"twice in one call", [][]*measurev1.Result{
			{sample(ok, 0, "first", 0), sample(ok, 0, "second", time.Second)},
		}, []string{"0:STATUS_OK:first"}},
		{"other indexes are other samples", [][]*measurev1.Result{
			{sample(ok, 0, "a", 0)}, {sample(ok, 1, "b", 0), sample(ok, 0, "again", 0)},
		}, []string{"0:STATUS_OK:a", "1:STATUS_OK:b"}},
	}
	// RecordResults writes results as AddResults does (with a header).
	writers := map[string]func(*Store, context.Context, []*measurev1.Result) error{
		"AddResults": (*Store).AddResults,
		"RecordResults": func(s *Store, ctx context.Context, rs []*measurev1.Result) error {
			return s.RecordResults(ctx, &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING}, rs)
		},
	}
	for name, write := range writers {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				ctx := testnet.Ctx(t, 30*time.Second)
				s, _ := openTemp(t)
				for _, w := range tt.writes {
					if err := write(s, ctx, w); err != nil {
						t.Fatal(err)
					}
				}
				if got := stored(t, s); !slices.Equal(got, tt.want) {
					t.Errorf("stored %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// RecordResults writes the results and the run's header in one
// transaction, leaves the planned tests alone, and writes nothing when a
// result is refused.
func TestRecordResults(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	planned := []*measurev1.PlannedTest{{TestId: "t00001", SrcNode: "a", DstNode: "b", Path: measurev1.Path_PATH_HOST_TO_HOST}}
	if err := s.CreateRun(ctx, &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING, Planned: planned}); err != nil {
		t.Fatal(err)
	}
	hdr := &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING, TestsDone: 1}
	if err := s.RecordResults(ctx, hdr, []*measurev1.Result{sample(ok, 0, "first", 0)}); err != nil {
		t.Fatal(err)
	}
	bad := sample(ok, 0, "no src", 0)
	bad.TestId, bad.SrcNode = "t00002", ""
	hdr2 := &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING, TestsDone: 3}
	if err := s.RecordResults(ctx, hdr2, []*measurev1.Result{sample(ok, 1, "second", 0), bad}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a refused result: err = %v, want ErrInvalid", err)
	}
	if got, want := stored(t, s), []string{"0:STATUS_OK:first"}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
	run, err := s.GetRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if run.GetTestsDone() != 1 || len(run.GetPlanned()) != 1 {
		t.Errorf("run %v: want tests_done 1 (the refused write's header not stored) and its planned test kept", run)
	}
	if err := s.RecordResults(ctx, &measurev1.Run{}, []*measurev1.Result{sample(ok, 1, "x", 0)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a run without ID: err = %v, want ErrInvalid", err)
	}
}

// A late test result replaces its test's interrupted placeholder, once,
// and fixes the run's failure count; anything else is left alone.
func TestReplaceInterrupted(t *testing.T) {
	tests := []struct {
		name         string
		before       []*measurev1.Result   // stored first, by AddResults
		late         [][]*measurev1.Result // one ReplaceInterrupted call each, of one test
		wantReplaced [][]bool
		want         []string
		wantFailed   uint32 // the run's tests_failed, 1 before
	}{
		{"placeholder replaced by a real result", []*measurev1.Result{sample(interrupted, 0, "placeholder", time.Hour)},
			[][]*measurev1.Result{{sample(ok, 0, "late", 0)}}, [][]bool{{true}},
			[]string{"0:STATUS_OK:late"}, 0},
		{"placeholder replaced by a failure", []*measurev1.Result{sample(interrupted, 0, "placeholder", time.Hour)},
			[][]*measurev1.Result{{sample(timeout, 0, "late timeout", 0)}}, [][]bool{{true}},
			[]string{"0:STATUS_TIMEOUT:late timeout"}, 1},
		{"every sample replaces the one placeholder", []*measurev1.Result{sample(interrupted, 0, "placeholder", time.Hour)},
			[][]*measurev1.Result{{sample(ok, 0, "64B", 0), sample(ok, 1, "1KiB", time.Second), sample(ok, 2, "64KiB", 2*time.Second)}},
			[][]bool{{true}}, []string{"0:STATUS_OK:64B", "1:STATUS_OK:1KiB", "2:STATUS_OK:64KiB"}, 0},
		{"replaced exactly once", []*measurev1.Result{sample(interrupted, 0, "placeholder", time.Hour)},
			[][]*measurev1.Result{{sample(ok, 0, "late", 0)}, {sample(ok, 0, "again", time.Second)}}, [][]bool{{true}, {false}},
			[]string{"0:STATUS_OK:late"}, 0},
		{"a stored real result stays", []*measurev1.Result{sample(ok, 0, "first", 0)},
			[][]*measurev1.Result{{sample(ok, 0, "duplicate", time.Second)}}, [][]bool{{false}},
			[]string{"0:STATUS_OK:first"}, 1},
		{"a stored failure stays", []*measurev1.Result{sample(timeout, 0, "timed out", 0)},
			[][]*measurev1.Result{{sample(ok, 0, "late", time.Second)}}, [][]bool{{false}},
			[]string{"0:STATUS_TIMEOUT:timed out"}, 1},
		{"a test without results stays without", nil,
			[][]*measurev1.Result{{sample(ok, 0, "late", 0)}}, [][]bool{{false}}, []string{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testnet.Ctx(t, 30*time.Second)
			s, _ := openTemp(t)
			run := &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_INTERRUPTED, TestsPlanned: 1, TestsDone: 1, TestsFailed: 1,
				Planned: []*measurev1.PlannedTest{{TestId: "t00001", SrcNode: "a", DstNode: "b"}}}
			if err := s.CreateRun(ctx, run); err != nil {
				t.Fatal(err)
			}
			if err := s.AddResults(ctx, tt.before); err != nil {
				t.Fatal(err)
			}
			for i, late := range tt.late {
				got, err := s.ReplaceInterrupted(ctx, [][]*measurev1.Result{late})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tt.wantReplaced[i]) {
					t.Errorf("call %d: replaced %v, want %v", i, got, tt.wantReplaced[i])
				}
			}
			if got := stored(t, s); !slices.Equal(got, tt.want) {
				t.Errorf("stored %q, want %q", got, tt.want)
			}
			got, err := s.GetRun(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if got.GetTestsFailed() != tt.wantFailed || got.GetTestsDone() != 1 || len(got.GetPlanned()) != 1 {
				t.Errorf("run: failed %d, done %d, %d planned; want %d, 1, 1", got.GetTestsFailed(), got.GetTestsDone(), len(got.GetPlanned()), tt.wantFailed)
			}
			failed, err := s.RunTests(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			wantTestFailed := false
			for _, w := range tt.want {
				wantTestFailed = wantTestFailed || !strings.Contains(w, ":STATUS_OK:")
			}
			if f, has := failed["t00001"]; has != (len(tt.want) > 0) || f != wantTestFailed {
				t.Errorf("RunTests = %v, want t00001 failed: %t", failed, wantTestFailed)
			}
		})
	}

	t.Run("one batch, several tests", func(t *testing.T) {
		ctx := testnet.Ctx(t, 30*time.Second)
		s, _ := openTemp(t)
		if err := s.CreateRun(ctx, &measurev1.Run{RunId: "r1", TestsFailed: 2}); err != nil {
			t.Fatal(err)
		}
		second := func(status measurev1.Status, msg string) *measurev1.Result {
			r := sample(status, 0, msg, time.Minute)
			r.TestId = "t00002"
			return r
		}
		if err := s.AddResults(ctx, []*measurev1.Result{sample(interrupted, 0, "p1", time.Hour), second(interrupted, "p2")}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ReplaceInterrupted(ctx, [][]*measurev1.Result{{sample(ok, 0, "late1", 0)}, {second(ok, "late2")}, {sample(ok, 0, "dup", 0)}})
		if err != nil || !slices.Equal(got, []bool{true, true, false}) {
			t.Errorf("replaced %v, %v; want [true true false]", got, err)
		}
		if run, err := s.GetRun(ctx, "r1"); err != nil || run.GetTestsFailed() != 0 {
			t.Errorf("run %v, %v; want no failed test", run, err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		ctx := testnet.Ctx(t, 30*time.Second)
		s, _ := openTemp(t)
		other := sample(ok, 1, "", 0)
		other.TestId = "t00002"
		for _, in := range [][][]*measurev1.Result{{{}}, {{sample(ok, 0, "", 0), other}}, {{{TestId: "t"}}}} {
			if _, err := s.ReplaceInterrupted(ctx, in); err == nil {
				t.Errorf("ReplaceInterrupted(%v) accepted", in)
			}
		}
	})
}

// A store written before the sample index existed gets it at Open, and
// retention deletes its entries with the results.
func TestSampleIndexBuiltAndPruned(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, path := openTemp(t)
	if err := s.AddResults(ctx, []*measurev1.Result{sample(interrupted, 0, "placeholder", 0), sample(ok, 1, "real", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketTestResults) })
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}

	s, err = Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.AddResults(ctx, []*measurev1.Result{sample(ok, 0, "late", time.Second), sample(ok, 1, "dup", time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got, want := stored(t, s), []string{"0:STATUS_OK:late", "1:STATUS_OK:real"}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}

	if _, err := s.RollUp(ctx, t0.Add(2*time.Hour), 0, func([]*measurev1.Result) []*measurev1.Rollup { return nil }); err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketTestResults).Cursor().First(); k != nil {
			return fmt.Errorf("index entry %q outlives its result", k)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	// With its results gone, the sample is new again.
	if err := s.AddResults(ctx, []*measurev1.Result{sample(ok, 0, "new", 3*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, want := stored(t, s), []string{"0:STATUS_OK:new"}; !slices.Equal(got, want) {
		t.Errorf("after the roll-up: stored %q, want %q", got, want)
	}
}
