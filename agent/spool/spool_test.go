package spool_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/agent/spool"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// result is a client answer to work ID id (in work_id), whose message
// tells entries with the same ID apart.
func result(id, msg string) *agentv1.WorkResult {
	return &agentv1.WorkResult{WorkId: id, Status: measurev1.Status_STATUS_OK, Message: msg,
		Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{
			Status: measurev1.Status_STATUS_OK, Message: strings.Repeat("x", 200)}}}}}
}

// pending is the spool's content as "workID:msg", oldest first.
func pending(t *testing.T, s *spool.Spool) []string {
	t.Helper()
	rs, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range rs {
		out = append(out, protocol.ResultWorkID(r)+":"+r.GetMessage())
	}
	return out
}

func open(t *testing.T, cfg spool.Config) (*spool.Spool, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.LockTimeout = 100 * time.Millisecond
	s, err := spool.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

// backends runs a test on a file spool and an in-memory one.
var backends = []struct {
	name string
	dir  func(t *testing.T) string
}{
	{"file", func(t *testing.T) string { return t.TempDir() }},
	{"memory", func(*testing.T) string { return "" }},
}

func TestPutAckPending(t *testing.T) {
	type step struct {
		put []string // "workID:msg"
		// putWork are results whose test_id is not their work ID
		// ("workID:msg"; test_id "t"), putOld results of an agent older
		// than work_id, with test_id alone ("testID:msg").
		putWork, putOld []string
		ack             []string
		want            []string // pending after the step
		// wantAcked is how many results the ack removed.
		wantAcked int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"oldest first", []step{
			{put: []string{"r/t1:a", "r/t2:b", "r/t3:c"}, want: []string{"r/t1:a", "r/t2:b", "r/t3:c"}},
		}},
		{"ack removes one test", []step{
			{put: []string{"r/t1:a", "r/t2:b", "r/t3:c"}, ack: []string{"r/t2"}, want: []string{"r/t1:a", "r/t3:c"}, wantAcked: 1},
		}},
		{"ack removes every entry of a test ID", []step{
			{put: []string{"r/t1:busy", "r/t2:b", "r/t1:retry"}, ack: []string{"r/t1"}, want: []string{"r/t2:b"}, wantAcked: 2},
		}},
		{"ack of unknown IDs is no error", []step{
			{put: []string{"r/t1:a"}, ack: []string{"r/t9", ""}, want: []string{"r/t1:a"}},
		}},
		{"ack only matches whole test IDs", []step{
			{put: []string{"r/t1:a", "r/t1\x00x:b", "r/t10:c"}, ack: []string{"r/t1"}, want: []string{"r/t1\x00x:b", "r/t10:c"}, wantAcked: 1},
		}},
		{"keyed by work_id, not test_id", []step{
			{putWork: []string{"r/t1:a", "r/t2:b"}, ack: []string{"t"}, want: []string{"r/t1:a", "r/t2:b"}},
			{ack: []string{"r/t2"}, want: []string{"r/t1:a"}, wantAcked: 1},
		}},
		{"an older agent's result, test_id alone, keyed by it", []step{
			{putOld: []string{"r/t1:a"}, put: []string{"r/t2:b"}, ack: []string{"r/t1"}, want: []string{"r/t2:b"}, wantAcked: 1},
		}},
		{"several IDs at once, then more puts", []step{
			{put: []string{"r/t1:a", "r/t2:b", "r/t3:c"}, ack: []string{"r/t3", "r/t1"}, want: []string{"r/t2:b"}, wantAcked: 2},
			{put: []string{"r/t4:d"}, want: []string{"r/t2:b", "r/t4:d"}},
			{ack: []string{"r/t2", "r/t4"}, want: []string{}, wantAcked: 2},
		}},
	}
	for _, b := range backends {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				s, _ := open(t, spool.Config{Dir: b.dir(t)})
				for i, st := range tt.steps {
					var puts []*agentv1.WorkResult
					for _, p := range st.putOld {
						id, msg, _ := strings.Cut(p, ":")
						r := result(id, msg)
						r.WorkId, r.TestId = "", id //nolint:staticcheck // SA1019: an agent of the previous version's result
						puts = append(puts, r)
					}
					for _, p := range st.putWork {
						id, msg, _ := strings.Cut(p, ":")
						r := result(id, msg)
						r.TestId = "t" //nolint:staticcheck // SA1019: the deprecated field, set to another value
						puts = append(puts, r)
					}
					for _, p := range st.put {
						id, msg, _ := strings.Cut(p, ":")
						puts = append(puts, result(id, msg))
					}
					for _, r := range puts {
						if err := s.Put(r); err != nil {
							t.Fatal(err)
						}
					}
					got, err := s.Ack(st.ack...)
					if err != nil || got != st.wantAcked {
						t.Errorf("step %d: Ack(%q) = %d, %v; want %d", i, st.ack, got, err, st.wantAcked)
					}
					if p := pending(t, s); !slices.Equal(p, st.want) {
						t.Errorf("step %d: pending %q, want %q", i, p, st.want)
					}
					if s.Len() != len(st.want) {
						t.Errorf("step %d: Len %d, want %d", i, s.Len(), len(st.want))
					}
				}
			})
		}
	}
}

func TestBoundDropsOldest(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		puts        int
		want        []string
		wantDropped uint64
	}{
		{"under the bound", 3, 2, []string{"r/t0:", "r/t1:"}, 0},
		{"at the bound", 3, 3, []string{"r/t0:", "r/t1:", "r/t2:"}, 0},
		{"over the bound", 3, 5, []string{"r/t2:", "r/t3:", "r/t4:"}, 2},
		{"bound of one", 1, 4, []string{"r/t3:"}, 3},
	}
	for _, b := range backends {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				s, logs := open(t, spool.Config{Dir: b.dir(t), MaxResults: tt.max})
				for i := range tt.puts {
					if err := s.Put(result(fmt.Sprintf("r/t%d", i), "")); err != nil {
						t.Fatal(err)
					}
				}
				if got := pending(t, s); !slices.Equal(got, tt.want) {
					t.Errorf("pending %q, want %q", got, tt.want)
				}
				if got := s.Dropped(); got != tt.wantDropped {
					t.Errorf("Dropped = %d, want %d", got, tt.wantDropped)
				}
				if got := strings.Count(logs.String(), "dropped the oldest result"); uint64(got) != tt.wantDropped {
					t.Errorf("%d drops logged, want %d:\n%s", got, tt.wantDropped, logs)
				}
			})
		}
	}
}

func TestDefaultBound(t *testing.T) {
	if _, err := spool.Open(spool.Config{MaxResults: -1}); err == nil {
		t.Error("a negative bound was accepted")
	}
	s, _ := open(t, spool.Config{})
	for i := range spool.DefaultMaxResults + 1 {
		if err := s.Put(&agentv1.WorkResult{WorkId: fmt.Sprintf("r/t%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != spool.DefaultMaxResults || s.Dropped() != 1 {
		t.Errorf("Len %d, Dropped %d; want %d and 1", s.Len(), s.Dropped(), spool.DefaultMaxResults)
	}
}

// The file keeps the results, their order and the drop count across a
// reopen, as across an agent restart.
func TestSurvivesReopen(t *testing.T) {
	tests := []struct {
		name        string
		maxAfter    int // the bound at the reopen
		want        []string
		wantDropped uint64
	}{
		{"same bound", 3, []string{"r/t2:", "r/t4:", "r/t5:"}, 2},
		{"lower bound drops the oldest", 1, []string{"r/t5:"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := spool.Open(spool.Config{Dir: dir, MaxResults: 3})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 { // t0 and t1 dropped
				if err := s.Put(result(fmt.Sprintf("r/t%d", i), "")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Ack("r/t3"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Ack("r/t2"); !errors.Is(err, spool.ErrClosed) {
				t.Errorf("Ack after Close: %v, want ErrClosed", err)
			}
			if fi, err := os.Stat(filepath.Join(dir, spool.FileName)); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("spool file: %v, %v; want mode 600", fi, err)
			}

			s, _ = open(t, spool.Config{Dir: dir, MaxResults: 3})
			if err := s.Put(result("r/t5", "")); err != nil { // after the older ones
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, _ = open(t, spool.Config{Dir: dir, MaxResults: tt.maxAfter})
			if got := pending(t, s); !slices.Equal(got, tt.want) {
				t.Errorf("after reopen: pending %q, want %q", got, tt.want)
			}
			if got := s.Dropped(); got != tt.wantDropped {
				t.Errorf("after reopen: Dropped = %d, want %d", got, tt.wantDropped)
			}
		})
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, spool.Config{Dir: dir})
	s, err := spool.Open(spool.Config{Dir: dir, LockTimeout: 100 * time.Millisecond})
	if err == nil {
		_ = s.Close()
		t.Fatal("a second Open of a held spool succeeded")
	}
	if !errors.Is(err, spool.ErrLocked) {
		t.Errorf("err = %v, want ErrLocked", err)
	}
}

// A damaged file is moved aside and replaced by an empty spool; entries
// that do not decode are dropped and counted.
func TestDamagedFile(t *testing.T) {
	// A real spool file cut in half, as a full disk or a bad copy leaves it.
	full := t.TempDir()
	s, err := spool.Open(spool.Config{Dir: full})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := s.Put(result(fmt.Sprintf("r/t%05d", i), "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(filepath.Join(full, spool.FileName))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		// wantAside: the file is moved aside; an empty file is simply
		// made a spool.
		wantAside bool
	}{
		{"truncated", whole[:len(whole)/2], true},
		{"not a spool", bytes.Repeat([]byte("meshperf"), 4096), true},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, spool.FileName), tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, logs := open(t, spool.Config{Dir: dir})
			if n := s.Len(); n != 0 {
				t.Errorf("Len %d, want 0", n)
			}
			if err := s.Put(result("r/new", "")); err != nil {
				t.Fatalf("Put on the new spool: %v", err)
			}
			if got, want := pending(t, s), []string{"r/new:"}; !slices.Equal(got, want) {
				t.Errorf("pending %q, want %q", got, want)
			}
			aside, _ := filepath.Glob(filepath.Join(dir, spool.FileName+".corrupt-*"))
			moved := len(aside) == 1 && strings.Contains(logs.String(), "moved aside")
			if moved != tt.wantAside {
				t.Errorf("moved aside: %v (%v), want %v; log:\n%s", moved, aside, tt.wantAside, logs)
			}
			if tt.wantAside {
				if b, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(b, tt.data) {
					t.Errorf("the damaged file was not kept as it was: %v", err)
				}
			}
		})
	}

	t.Run("entry that does not decode", func(t *testing.T) {
		dir := t.TempDir()
		s, err := spool.Open(spool.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"r/t1", "r/t2"} {
			if err := s.Put(result(id, "")); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(filepath.Join(dir, spool.FileName), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("results")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0xff, 0xff, 0xff})
		})
		if cerr := db.Close(); err != nil || cerr != nil {
			t.Fatal(err, cerr)
		}
		s, logs := open(t, spool.Config{Dir: dir})
		if got, want := pending(t, s), []string{"r/t2:"}; !slices.Equal(got, want) {
			t.Errorf("pending %q, want %q", got, want)
		}
		if s.Dropped() != 1 || !strings.Contains(logs.String(), "do not decode") {
			t.Errorf("Dropped %d, want 1, logged:\n%s", s.Dropped(), logs)
		}
		if n, err := s.Ack("r/t1"); n != 0 || err != nil {
			t.Errorf("Ack of the dropped entry = %d, %v; want 0", n, err)
		}
	})
}

// TestOpenRefusesLinks: a state directory or a spool file that is a
// symbolic link (or a spool file that is a FIFO) is refused, so whoever
// could write the directory's parent cannot point the agent's writes
// elsewhere; nothing is created behind the link.
func TestOpenRefusesLinks(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, root string) (dir, victim string)
		wantErr string
	}{
		{"directory is a link", func(t *testing.T, root string) (string, string) {
			outside := filepath.Join(root, "outside")
			if err := os.Mkdir(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(root, "state")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "state"), filepath.Join(outside, spool.FileName)
		}, "a symbolic link, not a directory"},
		{"file is a link", func(t *testing.T, root string) (string, string) {
			victim := filepath.Join(root, "victim")
			if err := os.WriteFile(victim, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dir, spool.FileName)); err != nil {
				t.Fatal(err)
			}
			return dir, victim
		}, "a symbolic link, not a regular file"},
		{"file is a FIFO", func(t *testing.T, root string) (string, string) {
			dir := filepath.Join(root, "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(dir, spool.FileName), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir, ""
		}, "a FIFO, not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, victim := tt.prepare(t, t.TempDir())
			sp, err := spool.Open(spool.Config{Dir: dir})
			if err == nil {
				_ = sp.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open: %v, want an error with %q", err, tt.wantErr)
			}
			if victim != "" {
				if fi, err := os.Stat(victim); err == nil && fi.Size() > 0 {
					t.Errorf("%s written behind the link: %d bytes", victim, fi.Size())
				}
			}
		})
	}
}

// TestResultBytesBound: the results a spool holds are bounded in bytes
// too: Put drops the oldest to make room, a result larger than the bound
// alone is refused, and a file reopened with a lower bound drops its
// oldest; in memory and in a file alike.
func TestResultBytesBound(t *testing.T) {
	big := func(id string) *agentv1.WorkResult {
		return &agentv1.WorkResult{WorkId: id, Message: strings.Repeat("x", 10_000)}
	}
	for _, dir := range []string{"", t.TempDir()} {
		name := "memory"
		if dir != "" {
			name = "file"
		}
		t.Run(name, func(t *testing.T) {
			sp, err := spool.Open(spool.Config{Dir: dir, MaxResultBytes: 50_000})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if err := sp.Put(big(fmt.Sprintf("t%d", i))); err != nil {
					t.Fatal(err)
				}
			}
			// Each is a little over 10,000 bytes: 4 fit in 50,000.
			if sp.Len() != 4 || sp.Dropped() != 6 {
				t.Errorf("%d results held, %d dropped; want 4 and 6", sp.Len(), sp.Dropped())
			}
			pending, err := sp.Pending()
			if err != nil || len(pending) != 4 || pending[0].GetWorkId() != "t6" {
				t.Errorf("pending %d, first %q, %v; want the newest 4 from t6", len(pending), pending[0].GetWorkId(), err)
			}
			if err := sp.Put(&agentv1.WorkResult{WorkId: "huge", Message: strings.Repeat("x", 60_000)}); err == nil || !strings.Contains(err.Error(), "more than the spool holds") {
				t.Errorf("a result over the bound: %v, want refused", err)
			}
			if n, err := sp.Ack("t6", "t7"); err != nil || n != 2 {
				t.Fatalf("ack: %d, %v", n, err)
			}
			for i := 10; i < 12; i++ { // room for two after the ack: nothing dropped
				if err := sp.Put(big(fmt.Sprintf("t%d", i))); err != nil {
					t.Fatal(err)
				}
			}
			if sp.Len() != 4 || sp.Dropped() != 6 {
				t.Errorf("after an ack of 2 and 2 more: %d held, %d dropped; want 4 and 6", sp.Len(), sp.Dropped())
			}
			if err := sp.Close(); err != nil {
				t.Fatal(err)
			}
			if dir == "" {
				return
			}
			sp, err = spool.Open(spool.Config{Dir: dir, MaxResultBytes: 25_000})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sp.Close() }()
			if sp.Len() != 2 || sp.Dropped() != 8 {
				t.Errorf("reopened with room for 2: %d held, %d dropped; want 2 and 8", sp.Len(), sp.Dropped())
			}
		})
	}
}
