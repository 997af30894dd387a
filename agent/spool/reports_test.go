package spool_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/agent/spool"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// seqsOf is the spool's pending reports' seqs, oldest first.
func seqsOf(t *testing.T, s *spool.Spool) []uint64 {
	t.Helper()
	rs, err := s.PendingReports()
	if err != nil {
		t.Fatal(err)
	}
	out := []uint64{}
	for _, r := range rs {
		out = append(out, r.GetSeq())
	}
	return out
}

func TestReports(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onDisk bool
	}{{"file", true}, {"memory", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := ""
			if tc.onDisk {
				dir = t.TempDir()
			}
			s, err := spool.Open(spool.Config{Dir: dir, MaxReports: 3})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				seq, err := s.PutReport(&agentv1.ProbeReport{Seq: 99, PlanVersion: uint64(i)})
				if err != nil {
					t.Fatal(err)
				}
				if want := uint64(i + 1); seq != want {
					t.Fatalf("PutReport #%d: seq %d, want %d (the spool numbers reports, not the caller)", i, seq, want)
				}
			}
			if got, want := seqsOf(t, s), []uint64{2, 3, 4}; !slices.Equal(got, want) {
				t.Fatalf("pending after 4 puts into 3 places: %v, want %v (oldest dropped)", got, want)
			}
			if held, dropped := s.Reports(); held != 3 || dropped != 1 {
				t.Fatalf("Reports() = %d held, %d dropped; want 3, 1", held, dropped)
			}
			n, err := s.AckReports(3, 77)
			if err != nil || n != 1 {
				t.Fatalf("AckReports(3, 77) = %d, %v; want 1 removed", n, err)
			}
			if got, want := seqsOf(t, s), []uint64{2, 4}; !slices.Equal(got, want) {
				t.Fatalf("pending after the ack: %v, want %v", got, want)
			}
			if !tc.onDisk {
				return
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = spool.Open(spool.Config{Dir: dir, MaxReports: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if got, want := seqsOf(t, s), []uint64{2, 4}; !slices.Equal(got, want) {
				t.Fatalf("pending after reopening: %v, want %v", got, want)
			}
			seq, err := s.PutReport(&agentv1.ProbeReport{})
			if err != nil || seq != 5 {
				t.Fatalf("PutReport after reopening = %d, %v; want seq 5 (numbers survive restarts)", seq, err)
			}
			if held, dropped := s.Reports(); held != 3 || dropped != 1 {
				t.Fatalf("Reports() after reopening = %d held, %d dropped; want 3, 1", held, dropped)
			}
			// Reopened with a lower bound, the spool drops its oldest
			// reports at once, and counts them.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, logs := open(t, spool.Config{Dir: dir, MaxReports: 1})
			if got, want := seqsOf(t, s), []uint64{5}; !slices.Equal(got, want) {
				t.Fatalf("pending after reopening with MaxReports 1: %v, want %v", got, want)
			}
			if held, dropped := s.Reports(); held != 1 || dropped != 3 {
				t.Fatalf("Reports() after reopening with MaxReports 1 = %d held, %d dropped; want 1, 3", held, dropped)
			}
			if !strings.Contains(logs.String(), "probe report spool full") || !strings.Contains(logs.String(), "seq=2") {
				t.Errorf("the drops at Open were not logged with their seq:\n%s", logs.String())
			}
		})
	}
}

// TestSeqEpoch: a spool numbers its reports in one seq epoch, not 0: a
// file spool keeps its epoch across restarts (its seqs go on), a new file
// or a spool in memory draws a new one (its seqs start again at 1), and
// a file from before seq epochs keeps its numbering, as epoch 0.
func TestSeqEpoch(t *testing.T) {
	put := func(t *testing.T, s *spool.Spool) *agentv1.ProbeReport {
		t.Helper()
		r := &agentv1.ProbeReport{SeqEpoch: 12345}
		if _, err := s.PutReport(r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	reopen := func(t *testing.T, s *spool.Spool, dir string) *spool.Spool {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, _ := open(t, spool.Config{Dir: dir})
		return s2
	}
	tests := []struct {
		name string
		// old makes dir a spool file from before seq epochs whose reports
		// bucket numbered 5 reports.
		old bool
		// lose deletes the file before the reopen.
		lose bool
		// same: the reopened spool has the first one's epoch.
		same     bool
		wantSeqs [2]uint64 // of a report put before and after the reopen
	}{
		{name: "file kept", same: true, wantSeqs: [2]uint64{1, 2}},
		{name: "file lost", lose: true, wantSeqs: [2]uint64{1, 1}},
		{name: "file from before seq epochs", old: true, same: true, wantSeqs: [2]uint64{6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.old {
				oldSpool(t, dir, 5)
			}
			s, _ := open(t, spool.Config{Dir: dir})
			first := put(t, s)
			if tt.old != (first.GetSeqEpoch() == 0) || first.GetSeqEpoch() != s.SeqEpoch() {
				t.Fatalf("seq_epoch %d (spool's %d), old file %v", first.GetSeqEpoch(), s.SeqEpoch(), tt.old)
			}
			if tt.lose {
				if err := os.Remove(filepath.Join(dir, spool.FileName)); err != nil {
					t.Fatal(err)
				}
			}
			s = reopen(t, s, dir)
			second := put(t, s)
			if got := [2]uint64{first.GetSeq(), second.GetSeq()}; got != tt.wantSeqs {
				t.Errorf("seqs %v, want %v", got, tt.wantSeqs)
			}
			if same := second.GetSeqEpoch() == first.GetSeqEpoch(); same != tt.same || second.GetSeqEpoch() == 0 && !tt.old {
				t.Errorf("seq_epoch %d after the reopen, %d before; want the same: %v", second.GetSeqEpoch(), first.GetSeqEpoch(), tt.same)
			}
		})
	}
	t.Run("memory", func(t *testing.T) {
		a, _ := open(t, spool.Config{})
		b, _ := open(t, spool.Config{})
		if r := put(t, a); r.GetSeqEpoch() == 0 || r.GetSeqEpoch() == b.SeqEpoch() || r.GetSeq() != 1 {
			t.Errorf("memory spools: seq %d epoch %d, the next's epoch %d; want seq 1 and two epochs, not 0",
				r.GetSeq(), r.GetSeqEpoch(), b.SeqEpoch())
		}
	})
}

// oldSpool writes in dir a spool file as agents before seq epochs left
// it: a meta bucket without the epoch, a reports bucket that numbered n.
func oldSpool(t *testing.T, dir string, n uint64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, spool.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket([]byte("meta")); err != nil {
			return err
		}
		b, err := tx.CreateBucket([]byte("reports"))
		if err != nil {
			return err
		}
		return b.SetSequence(n)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
