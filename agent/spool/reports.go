package spool

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// DefaultMaxReports is the bound of a spool whose Config.MaxReports is
// zero: 720 reports, two hours at a 10 s report interval and twelve at
// 60 s.
const DefaultMaxReports = 720

// loadReports creates the reports bucket, drops the reports that do not
// decode, counts the rest and reads (or draws, for a new file) the seq
// epoch. Caller is load, inside its transaction.
func (s *Spool) loadReports(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	switch v := meta.Get(keyReportsSeqEpoch); {
	case len(v) == 8:
		s.seqEpoch = binary.BigEndian.Uint64(v)
	case tx.Bucket(bucketReports) != nil && tx.Bucket(bucketReports).Sequence() > 0:
		s.seqEpoch = 0 // a file older than seq epochs: its numbering goes on
	default:
		s.seqEpoch = newSeqEpoch()
	}
	if err := putUint64(meta, keyReportsSeqEpoch, s.seqEpoch); err != nil {
		return err
	}
	b, err := tx.CreateBucketIfNotExists(bucketReports)
	if err != nil {
		return err
	}
	var bad [][]byte
	n := 0
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		r := &agentv1.ProbeReport{}
		if len(k) != 8 || proto.Unmarshal(v, r) != nil || r.GetSeq() != binary.BigEndian.Uint64(k) {
			bad = append(bad, bytes.Clone(k))
			continue
		}
		n++
	}
	for _, k := range bad {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	var dropped uint64
	if v := meta.Get(keyReportsDropped); len(v) == 8 {
		dropped = binary.BigEndian.Uint64(v)
	}
	if len(bad) > 0 {
		dropped += uint64(len(bad))
		if err := putUint64(meta, keyReportsDropped, dropped); err != nil {
			return err
		}
		s.log.Error("probe report spool held entries that do not decode; dropped", "count", len(bad), "dropped_total", dropped)
	}
	s.reports.n, s.reports.dropped = n, dropped
	return nil
}

// reportsLane is the probe reports' lane of at most bound entries (0:
// DefaultMaxReports).
func reportsLane(bound int) lane {
	if bound == 0 {
		bound = DefaultMaxReports
	}
	return lane{what: "probe report", bucket: bucketReports, droppedKey: keyReportsDropped, max: bound,
		describe: func(v []byte) []any {
			r := &agentv1.ProbeReport{}
			_ = proto.Unmarshal(v, r) // PutReport encoded it or Open decoded it
			return []any{"seq", r.GetSeq(), "max_reports", bound}
		}}
}

// newSeqEpoch draws a seq epoch: random, not 0 (the epoch of the spool
// files older than seq epochs).
func newSeqEpoch() uint64 {
	for {
		if e := rand.Uint64(); e != 0 {
			return e
		}
	}
}

// SeqEpoch is the epoch of the report seqs this spool gives
// (agentv1.ProbeReport's seq_epoch): drawn when the spool was created,
// kept in its file; a spool in memory draws one when opened.
func (s *Spool) SeqEpoch() uint64 { return s.seqEpoch }

// PutReport numbers r (it sets r.Seq to one more than any report this
// spool ever numbered, also across restarts of a file spool, and
// r.SeqEpoch to SeqEpoch), keeps a copy
// until AckReports names that seq, and returns the seq. When the spool is
// full it first drops the oldest report (logged and counted). It returns
// once r is on disk, for a file spool.
func (s *Spool) PutReport(r *agentv1.ProbeReport) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if err := s.makeRoom(&s.reports, 0); err != nil { // reports: bounded by count alone
		return 0, err
	}
	r.SeqEpoch = s.seqEpoch
	if s.db == nil {
		s.memSeq++
		r.Seq = s.memSeq
		v, err := proto.Marshal(r)
		if err != nil {
			return 0, fmt.Errorf("spool: encode report %d: %w", r.GetSeq(), err)
		}
		s.reports.mem = append(s.reports.mem, memEntry{data: v})
		s.reports.n++
		return r.GetSeq(), nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketReports)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		r.Seq = seq
		v, err := proto.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode report %d: %w", seq, err)
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, seq), v)
	})
	if err != nil {
		return 0, fmt.Errorf("spool: put report: %w", err)
	}
	s.reports.n++
	return r.GetSeq(), nil
}

// AckReports forgets the reports of each seq and returns how many it
// removed; an unknown seq is no error.
func (s *Spool) AckReports(seqs ...uint64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(&s.reports, func(e memEntry) bool {
		r := &agentv1.ProbeReport{}
		_ = proto.Unmarshal(e.data, r) // PutReport encoded it
		return slices.Contains(seqs, r.GetSeq())
	}, func(*bolt.Tx) [][]byte {
		keys := make([][]byte, len(seqs))
		for i, seq := range seqs {
			keys[i] = binary.BigEndian.AppendUint64(nil, seq)
		}
		return keys
	})
}

// PendingReports returns every report the spool holds, oldest first.
func (s *Spool) PendingReports() ([]*agentv1.ProbeReport, error) {
	return pending(s, &s.reports, func() *agentv1.ProbeReport { return &agentv1.ProbeReport{} })
}

// Reports returns how many reports the spool holds and how many it ever
// dropped (over the life of its file).
func (s *Spool) Reports() (held int, dropped uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports.n, s.reports.dropped
}
