package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meshperf.db")
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func result(run, id, src, dst string, path measurev1.Path, test measurev1.Test, start time.Time) *measurev1.Result {
	return &measurev1.Result{
		TestId: id, RunId: run, SrcNode: src, DstNode: dst, Path: path,
		Spec: &measurev1.TestSpec{Test: test}, Status: measurev1.Status_STATUS_OK,
		StartTime: timestamppb.New(start),
	}
}

// fixture: 2 runs over 3 nodes, 12 results.
func fixture() []*measurev1.Result {
	var rs []*measurev1.Result
	pairs := [][2]string{{"node-1", "node-2"}, {"node-2", "node-1"}, {"node-1", "node-3"}}
	for run := 0; run < 2; run++ {
		for i, p := range pairs {
			start := t0.Add(time.Duration(run)*time.Hour + time.Duration(i)*time.Second)
			runID := fmt.Sprintf("run-%d", run)
			rs = append(rs,
				result(runID, fmt.Sprintf("t%d-ping", i), p[0], p[1], measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING, start),
				result(runID, fmt.Sprintf("t%d-iperf", i), p[0], p[1], measurev1.Path_PATH_POD_TO_POD, measurev1.Test_TEST_IPERF3_TCP, start.Add(time.Millisecond)))
		}
	}
	return rs
}

func ids(rs []*measurev1.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.GetRunId() + "/" + r.GetTestId()
	}
	return out
}

func TestListResultsFilters(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	if err := s.AddResults(ctx, fixture()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"pair in time order", Filter{SrcNode: "node-1", DstNode: "node-2"},
			[]string{"run-0/t0-ping", "run-0/t0-iperf", "run-1/t0-ping", "run-1/t0-iperf"}},
		{"pair and time range", Filter{SrcNode: "node-1", DstNode: "node-2", Since: t0.Add(time.Minute), Until: t0.Add(2 * time.Hour)},
			[]string{"run-1/t0-ping", "run-1/t0-iperf"}},
		{"until is exclusive", Filter{SrcNode: "node-1", DstNode: "node-2", Until: t0.Add(time.Millisecond)},
			[]string{"run-0/t0-ping"}},
		{"source only", Filter{SrcNode: "node-2", Test: measurev1.Test_TEST_PING},
			[]string{"run-0/t1-ping", "run-1/t1-ping"}},
		{"destination only", Filter{DstNode: "node-3", Path: measurev1.Path_PATH_POD_TO_POD},
			[]string{"run-0/t2-iperf", "run-1/t2-iperf"}},
		{"run", Filter{RunID: "run-1", Test: measurev1.Test_TEST_IPERF3_TCP},
			[]string{"run-1/t0-iperf", "run-1/t2-iperf", "run-1/t1-iperf"}},
		{"nothing matches", Filter{SrcNode: "node-9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next, err := s.ListResults(ctx, tt.f, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if next != "" {
				t.Errorf("next page token = %q, want none", next)
			}
			if fmt.Sprint(ids(got)) != fmt.Sprint(tt.want) {
				t.Errorf("got %v\nwant %v", ids(got), tt.want)
			}
		})
	}
}

// listPaged lists every result of f, pageSize a page, following the
// page tokens; more than most pages fails t.
func listPaged(ctx context.Context, t *testing.T, s *Store, f Filter, pageSize, most int) []*measurev1.Result {
	t.Helper()
	var out []*measurev1.Result
	token := ""
	for pages := 0; ; pages++ {
		if pages > most {
			t.Fatalf("filter %+v: pagination does not end", f)
		}
		page, next, err := s.ListResults(ctx, f, pageSize, token)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		token = next
	}
}

func TestListResultsPages(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	all := fixture()
	if err := s.AddResults(ctx, all); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Filter{{}, {RunID: "run-0"}, {SrcNode: "node-1", DstNode: "node-2"}} {
		whole, _, err := s.ListResults(ctx, f, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		paged := listPaged(ctx, t, s, f, 5, len(all))
		if fmt.Sprint(ids(paged)) != fmt.Sprint(ids(whole)) {
			t.Errorf("filter %+v: pages give %v, one call gives %v", f, ids(paged), ids(whole))
		}
	}
}

// TestListResultsScanBudget: with a budget of 3 keys a page, listings
// whose filter matches little give short or empty pages with a next page
// token; followed to the end they give what the filter matches, in order,
// once each. The same holds for rollups.
func TestListResultsScanBudget(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "meshperf.db"), MaxScanKeys: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	all := fixture() // 12 results
	if err := s.AddResults(ctx, all); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		f     Filter
		keys  int // the keys its scan reads: every result, or the run's
		match func(*measurev1.Result) bool
	}{
		{Filter{}, 12, func(*measurev1.Result) bool { return true }},
		{Filter{DstNode: "node-3"}, 12, func(r *measurev1.Result) bool { return r.GetDstNode() == "node-3" }},
		{Filter{Test: measurev1.Test_TEST_IPERF3_TCP, RunID: "run-1"}, 6, func(r *measurev1.Result) bool {
			return r.GetRunId() == "run-1" && r.GetSpec().GetTest() == measurev1.Test_TEST_IPERF3_TCP
		}},
		{Filter{DstNode: "nobody"}, 12, func(*measurev1.Result) bool { return false }},
	} {
		// The listing's order: (src, dst, start), by run first for a run.
		var matched []*measurev1.Result
		for _, r := range all {
			if tt.match(r) {
				matched = append(matched, r)
			}
		}
		slices.SortFunc(matched, func(a, b *measurev1.Result) int {
			run := 0
			if tt.f.RunID != "" {
				run = strings.Compare(a.GetRunId(), b.GetRunId())
			}
			return cmp.Or(run, strings.Compare(a.GetSrcNode(), b.GetSrcNode()), strings.Compare(a.GetDstNode(), b.GetDstNode()),
				a.GetStartTime().AsTime().Compare(b.GetStartTime().AsTime()))
		})
		want := ids(matched)
		var got []string
		short, pages := false, 0
		token := ""
		for ; pages <= len(all); pages++ {
			page, next, err := s.ListResults(ctx, tt.f, 100, token)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(page)...)
			if next == "" {
				break
			}
			short = short || len(page) < 100
			token = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("filter %+v: pages give %v, want %v in this order", tt.f, got, want)
		}
		if !short || pages+1 < tt.keys/3 {
			t.Errorf("filter %+v: %d pages, short ones %v; want at least %d, a page every 3 keys", tt.f, pages+1, short, tt.keys/3)
		}
	}

	// The iperf3 results become 6 rollups (a pair and hour each; hourFold
	// folds no ping), 2 of them to node-3.
	if _, err := s.RollUp(ctx, t0.Add(24*time.Hour), 0, hourFold); err != nil {
		t.Fatal(err)
	}
	var rollups []*measurev1.Rollup
	pages, token := 0, ""
	for ; pages <= 12; pages++ {
		page, next, err := s.ListRollups(ctx, Filter{DstNode: "node-3"}, 100, token)
		if err != nil {
			t.Fatal(err)
		}
		rollups = append(rollups, page...)
		if next == "" {
			break
		}
		token = next
	}
	if len(rollups) != 2 || pages+1 < 2 {
		t.Errorf("rollups to node-3: %d in %d pages, want 2 in at least 2 (a page every 3 keys)", len(rollups), pages+1)
	}
}

func TestBadInput(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	noStart := result("r", "t", "a", "b", measurev1.Path_PATH_HOST_TO_HOST, measurev1.Test_TEST_PING, t0)
	noStart.StartTime = nil
	tests := []struct {
		name string
		call func() error
	}{
		{"node with NUL", func() error {
			return s.AddResults(ctx, []*measurev1.Result{result("r", "t", "a\x00b", "b", 1, 1, t0)})
		}},
		{"empty test id", func() error { return s.AddResults(ctx, []*measurev1.Result{result("r", "", "a", "b", 1, 1, t0)}) }},
		{"no start time", func() error { return s.AddResults(ctx, []*measurev1.Result{noStart}) }},
		{"garbage token", func() error { _, _, err := s.ListResults(ctx, Filter{}, 0, "!!"); return err }},
		{"token too short", func() error {
			_, _, err := s.ListResults(ctx, Filter{RunID: "x"}, 0, "YWJj")
			return err
		}},
		{"page too large", func() error { _, _, err := s.ListResults(ctx, Filter{}, MaxPageSize+1, ""); return err }},
		{"run without id", func() error { return s.PutRun(ctx, &measurev1.Run{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := s.GetRun(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(missing) err = %v, want ErrNotFound", err)
	}
}

func TestSurvivesReopen(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	path := filepath.Join(t.TempDir(), "meshperf.db")
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent writers, as the coordinator's test goroutines are: bbolt
	// batches them.
	var wg sync.WaitGroup
	for _, r := range fixture() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.AddResults(ctx, []*measurev1.Result{r}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	run := &measurev1.Run{RunId: "run-0", State: measurev1.RunState_RUN_STATE_RUNNING}
	if err := s.PutRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAgent(ctx, &storev1.Agent{NodeName: "node-1", AgentVersion: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("file mode = %o, want 600", mode)
	}
	s, err = Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	got, _, err := s.ListResults(ctx, Filter{}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(fixture()) {
		t.Errorf("after reopen: %d results, want %d", len(got), len(fixture()))
	}
	runs, err := s.Runs(ctx, measurev1.RunState_RUN_STATE_RUNNING)
	if err != nil || len(runs) != 1 || runs[0].GetRunId() != "run-0" {
		t.Errorf("Runs(RUNNING) = %v, %v; want run-0", runs, err)
	}
	agents, err := s.Agents(ctx)
	if err != nil || len(agents) != 1 || agents[0].GetAgentVersion() != "v1" {
		t.Errorf("Agents() = %v, %v; want node-1 v1", agents, err)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	_, path := openTemp(t)
	s, err := Open(Config{Path: path, LockTimeout: 100 * time.Millisecond})
	if err == nil {
		_ = s.Close()
		t.Fatal("a second Open of a locked file succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("err = %v, want ErrLocked", err)
	}
}

func TestDamagedFile(t *testing.T) {
	dir := t.TempDir()
	// A real store file cut in half, as a full disk or a bad copy leaves it.
	full := filepath.Join(dir, "full.db")
	s, err := Open(Config{Path: full})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testnet.Ctx(t, 30*time.Second)
	var many []*measurev1.Result
	for i := 0; i < 3000; i++ {
		many = append(many, result("run", fmt.Sprintf("t%05d", i), "node-1", "node-2", 1, 1, t0.Add(time.Duration(i)*time.Second)))
	}
	if err := s.AddResults(ctx, many); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	// The file runs on past its pages (bbolt grows it ahead): cut the pages.
	var used int64
	raw, err := bolt.Open(full, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = raw.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	if cerr := raw.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"truncated", b[:used/2]},
		{"not a store", bytes.Repeat([]byte("meshperf"), 4096)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Config{Path: path, LockTimeout: 100 * time.Millisecond})
			if err == nil {
				_ = s.Close()
				t.Fatal("a damaged file opened")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestRunsKeepPlannedApart(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	run := &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING, TestsPlanned: 2,
		Planned: []*measurev1.PlannedTest{{TestId: "t00001"}, {TestId: "t00002"}}}
	if err := s.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	// Progress updates carry no plan and must not lose it.
	if err := s.PutRun(ctx, &measurev1.Run{RunId: "r1", State: measurev1.RunState_RUN_STATE_RUNNING, TestsDone: 1, TestsPlanned: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetPlanned()) != 2 || got.GetTestsDone() != 1 {
		t.Errorf("GetRun = %d planned, %d done; want 2, 1", len(got.GetPlanned()), got.GetTestsDone())
	}
	hdrs, err := s.Runs(ctx)
	if err != nil || len(hdrs) != 1 || len(hdrs[0].GetPlanned()) != 0 {
		t.Errorf("Runs = %v, %v; want one header without its plan", hdrs, err)
	}
	if err := s.AddResults(ctx, []*measurev1.Result{result("r1", "t00002", "a", "b", 1, 1, t0)}); err != nil {
		t.Fatal(err)
	}
	ids, err := s.RunTestIDs(ctx, "r1")
	if err != nil || len(ids) != 1 || !ids["t00002"] {
		t.Errorf("RunTestIDs = %v, %v; want t00002", ids, err)
	}
}

// Two runs whose tests share an ID and a start time keep both results.
func TestRunsDoNotOverwriteEachOther(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	a := result("run-a", "t00001", "node-1", "node-2", 1, 1, t0)
	b := result("run-b", "t00001", "node-1", "node-2", 1, 1, t0)
	if err := s.AddResults(ctx, []*measurev1.Result{a, b}); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.ListResults(ctx, Filter{SrcNode: "node-1", DstNode: "node-2"}, 0, "")
	if err != nil || len(got) != 2 {
		t.Errorf("ListResults = %d results, %v; want 2", len(got), err)
	}
}

func TestTimesOutsideTheEpochRefused(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	old := result("r", "t", "a", "b", 1, 1, time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC))
	if err := s.AddResults(ctx, []*measurev1.Result{old}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a 1969 start time: err = %v, want ErrInvalid", err)
	}
	for _, f := range []Filter{
		{SrcNode: "a", DstNode: "b", Since: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Since: t0, Until: t0},
		{Since: t0.Add(time.Hour), Until: t0},
	} {
		if _, _, err := s.ListResults(ctx, f, 0, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("filter %+v: err = %v, want ErrInvalid", f, err)
		}
	}
}
