package store

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestAppendReportsSeqEpochs: an agent that lost its spool numbers its
// reports from 1 again under a new seq epoch; those reports are stored,
// not taken for resends of the old numbering's, while a resend of either
// numbering, in the head, compacted, or after a reopen, is still refused.
// Steps run in order on one store; each sends a batch of reports of
// source a (seq epoch, seq, period) and wants stored as given.
func TestAppendReportsSeqEpochs(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, path := openTemp(t)
	block := t0.Truncate(SeriesBlock)
	type sent struct {
		epoch, seq uint64
		period     int
	}
	const e1, e2 = 0x1111, 0x2222
	steps := []struct {
		name string
		// compact, if not 0, compacts the periods before it first.
		compact int
		reopen  bool
		reports []sent
		stored  []bool
	}{
		{name: "epoch 0 (an agent older than epochs)", reports: []sent{{0, 1, 0}, {0, 2, 1}, {0, 3, 2}, {0, 4, 3}, {0, 5, 4}},
			stored: []bool{true, true, true, true, true}},
		{name: "the spool lost: seqs from 1 again", compact: 3, reports: []sent{{e1, 1, 10}, {e1, 2, 11}, {e1, 3, 12}},
			stored: []bool{true, true, true}},
		{name: "resends of the new numbering", reports: []sent{{e1, 2, 11}, {e1, 3, 12}}, stored: []bool{false, false}},
		{name: "resends of the old, compacted and in the head", reports: []sent{{0, 1, 0}, {0, 5, 4}},
			stored: []bool{false, false}},
		{name: "two numberings in one batch", reports: []sent{{e1, 4, 13}, {e2, 1, 14}, {e1, 4, 13}, {e2, 2, 15}},
			stored: []bool{true, true, false, true}},
		{name: "after a reopen", compact: 14, reopen: true, reports: []sent{{e1, 3, 12}, {e2, 2, 15}, {e2, 3, 16}, {e1, 5, 17}},
			stored: []bool{false, false, true, true}},
		{name: "the older numbering went on after the newer: its resends, before and after", reports: []sent{{e1, 5, 17}, {e1, 4, 13}, {e1, 6, 18}, {e2, 3, 16}, {e2, 4, 19}},
			stored: []bool{false, false, true, false, true}},
	}
	want := 0
	for _, st := range steps {
		if st.compact > 0 {
			if _, err := s.CompactSeries(ctx, block.Add(time.Duration(st.compact)*10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if st.reopen {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var err error
			if s, err = Open(Config{Path: path}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
		}
		var reports []series.Report
		for _, r := range st.reports {
			x := rep(r.seq, block, r.period, "b", 10, 10, measurev1.Status_STATUS_OK, 100, 200, 300, 400)
			x.SeqEpoch = r.epoch
			reports = append(reports, x)
		}
		stored, err := s.AppendReports(ctx, reports)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for i := range stored {
			if stored[i] != st.stored[i] {
				t.Errorf("%s: stored %v, want %v", st.name, stored, st.stored)
				break
			}
		}
		for _, ok := range st.stored {
			if ok {
				want++
			}
		}
	}
	got, err := s.Series(ctx, series.Key{Src: "a", Dst: "b", Path: host2h, Kind: icmp}, time.Time{}, time.Time{})
	if err != nil || len(got) != want {
		t.Fatalf("%d samples stored, want %d (%v)", len(got), want, err)
	}
}

// TestAppendReportsSeqEpochLimits: a source keeps its last maxNumberings
// numberings (an epoch older than those is a new numbering again, a seq
// below the ones kept of a known epoch a resend), and a seq past what
// the store can number after the source's is refused, naming seq and
// seq_epoch, while the batch's other reports are stored.
func TestAppendReportsSeqEpochLimits(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	s, _ := openTemp(t)
	block := t0.Truncate(SeriesBlock)
	send := func(epoch, seq uint64, period int) (bool, error) {
		x := rep(seq, block, period, "b", 10, 10, measurev1.Status_STATUS_OK, 100, 200, 300, 400)
		x.SeqEpoch = epoch
		stored, err := s.AppendReports(ctx, []series.Report{x})
		return stored != nil && stored[0], err
	}
	for e := range uint64(maxNumberings + 1) {
		if ok, err := send(e, 1, int(e)); !ok || err != nil {
			t.Fatalf("epoch %d seq 1: stored %v, %v", e, ok, err)
		}
	}
	if ok, err := send(maxNumberings, 1, 0); ok || err != nil {
		t.Errorf("a resend of the newest epoch: stored %v, %v", ok, err)
	}
	if ok, err := send(0, 1, 20); !ok || err != nil {
		t.Errorf("epoch 0, older than the last %d: stored %v, %v; want a new numbering", maxNumberings, ok, err)
	}
	// Epoch 100 goes on past where epoch 101 began (two agents under one
	// name): its numbering splits at seq 3. Once its first numbering is
	// let go, its seq 2 is taken for a resend, not a new numbering that
	// would store its later resends again.
	for i, r := range []struct{ epoch, seq uint64 }{{100, 1}, {100, 2}, {101, 1}, {100, 3}, {102, 1}, {103, 1}} {
		if ok, err := send(r.epoch, r.seq, 40+i); !ok || err != nil {
			t.Fatalf("epoch %d seq %d: stored %v, %v", r.epoch, r.seq, ok, err)
		}
	}
	for _, r := range []struct {
		seq  uint64
		want bool
	}{{2, false}, {3, false}, {2, false}, {4, true}} {
		if ok, err := send(100, r.seq, 50+int(r.seq)); ok != r.want || err != nil {
			t.Errorf("epoch 100 seq %d after its first numbering was let go: stored %v, %v; want %v", r.seq, ok, err, r.want)
		}
	}
	ok, err := send(99, math.MaxUint64, 21)
	var refused ReportErrors
	if ok || !errors.As(err, &refused) || len(refused) != 1 || !errors.Is(refused[0].Err, ErrInvalid) ||
		!strings.Contains(err.Error(), "seq 18446744073709551615 of seq_epoch 99") {
		t.Errorf("seq past the store's numbering: stored %v, %v", ok, err)
	}
}

// TestSeqStateEncoding: the value of a source with only epoch 0 keeps
// the layout from before seq epochs (ranges alone), others round-trip,
// and malformed values are ErrCorrupt.
func TestSeqStateEncoding(t *testing.T) {
	ranges := seqRanges{{1, 3}, {7, 9}}
	old := ranges.encode()
	for _, tt := range []struct {
		name string
		st   seqState
		want []byte
	}{
		{"no numbering", seqState{ranges: ranges}, old},
		{"epoch 0 alone", seqState{numberings: []numbering{implicitSeqs}, ranges: ranges}, old},
		{"two numberings", seqState{numberings: []numbering{{5, 1, 10}, implicitSeqs}, ranges: ranges},
			append([]byte{2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 10,
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, old...)},
	} {
		v := tt.st.encode()
		if !bytes.Equal(v, tt.want) {
			t.Errorf("%s: encoded % x, want % x", tt.name, v, tt.want)
		}
		back, err := decodeSeqState(v)
		if err != nil || !bytes.Equal(back.encode(), v) {
			t.Errorf("%s: decoded %+v, %v", tt.name, back, err)
		}
	}
	for _, v := range [][]byte{
		{0},                                      // no numbering after a count byte
		append([]byte{5}, make([]byte, 5*24)...), // more than maxNumberings
		append([]byte{2}, make([]byte, 24)...),   // shorter than its count
		append([]byte{1}, make([]byte, 24+8)...), // ranges not whole
		make([]byte, 15),
	} {
		if _, err := decodeSeqState(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode % x: %v, want ErrCorrupt", v, err)
		}
	}
}

// FuzzDecodeSeqState: any value decodes or is ErrCorrupt, never a
// panic, and what decodes encodes to a value that decodes the same.
func FuzzDecodeSeqState(f *testing.F) {
	f.Add(seqRanges{{1, 3}}.encode())
	f.Add((&seqState{numberings: []numbering{{5, 1, 10}, implicitSeqs}, ranges: seqRanges{{1, 3}}}).encode())
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, v []byte) {
		st, err := decodeSeqState(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode: %v, not ErrCorrupt", err)
			}
			return
		}
		again, err := decodeSeqState(st.encode())
		if err != nil || !bytes.Equal(again.encode(), st.encode()) {
			t.Fatalf("%+v encodes to a value that decodes to %+v, %v", st, again, err)
		}
	})
}
