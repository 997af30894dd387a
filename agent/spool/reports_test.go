package spool_test

import (
	"slices"
	"strings"
	"testing"

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
