package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
)

// The continuous mesh's series: AppendReports writes each agent report
// whole, as one head key (series_head.go); CompactSeries later transposes
// the head into per-series chunks of SeriesBlock (series_compact.go);
// Series reads both. Layouts are in schema.go.

// ReportError is one report that AppendReports refused.
type ReportError struct {
	// Index is the report's index in AppendReports' argument.
	Index int
	// Err wraps ErrInvalid and names the report, summary, field and value.
	Err error
}

// Error is Err's message.
func (e ReportError) Error() string { return e.Err.Error() }

// Unwrap is Err.
func (e ReportError) Unwrap() error { return e.Err }

// ReportErrors is AppendReports' error when it refused some reports and
// stored the others; it is in Index order and errors.Is(err, ErrInvalid)
// holds.
type ReportErrors []ReportError

// Error counts the refused reports and gives the first three.
func (es ReportErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d reports refused: ", len(es))
	for i, e := range es {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(es)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap is the errors of the refused reports.
func (es ReportErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// AppendReports stores agents' reports in one write transaction (not a
// shared Batch: the caller groups reports itself) and returns which were
// stored. A report is written whole, as it came, under (Src, the store's
// seq of its Seq), so the cost is one key per report whatever its number
// of summaries.
//
// A report already stored (resent after a reconnect), also after
// CompactSeries or DeleteSeriesBefore took it out of the head, or
// appearing twice in reports, gets stored[i] false and is not stored
// again: the caller acknowledges it all the same. Seqs count within their
// SeqEpoch: the reports of a source's new epoch (its agent lost its
// spool and numbers from 1 again) are new ones, stored after all that
// the source stored before (series_seqs.go).
//
// Every field is validated (series.Report.Validate, and summaries must
// have distinct destination, path and kind). A refused report is not
// stored (stored[i] false) but does not stop the others: the error is
// then a ReportErrors listing the refused ones, each wrapping ErrInvalid
// and naming the report's index, the summary's index, the field and its
// value; the caller should acknowledge and drop them too (a resend would
// be refused again). Any other error (the context, the file) means
// nothing was stored and stored is nil.
func (s *Store) AppendReports(ctx context.Context, reports []series.Report) (stored []bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stored = make([]bool, len(reports))
	var refused ReportErrors
	refuse := func(i int, err error) {
		r := &reports[i]
		refused = append(refused, ReportError{Index: i,
			Err: fmt.Errorf("%w: report %d (src %q seq %d): %w", ErrInvalid, i, r.Src, r.Seq, err)})
	}
	// Validate and encode in parallel, outside the write transaction; a
	// report naming a node without an ID yet is encoded in it, once the
	// names have their IDs (series_append.go).
	items := make([]appendItem, len(reports))
	workers := prepAll(reports, items, &s.nodes)
	order := make([]int, 0, len(reports))
	fresh := map[string]uint32{}
	err = s.db.Update(func(tx *bolt.Tx) error {
		in := interner{tx: tx, cache: &s.nodes, fresh: fresh}
		// The names of reports naming new nodes (valid: prep checks
		// first) get IDs here, each once, in the order the reports name
		// them; then those reports are encoded on every core like the
		// rest.
		var pending []int
		for i := range items {
			if items[i].pending {
				pending = append(pending, i)
			}
		}
		if len(pending) > 0 {
			for _, name := range missingNames(workers) {
				if _, err := in.id(name); err != nil {
					return err
				}
			}
			if err := resolveAll(reports, items, workers, pending, fresh); err != nil {
				return err
			}
		}
		order = order[:0]
		for i := range items {
			if items[i].pending {
				return fmt.Errorf("report %d names a node without an ID after the IDs were given", i)
			}
			if items[i].err == nil {
				order = append(order, i)
			}
		}
		hb, sb := tx.Bucket(bucketSeriesHead), tx.Bucket(bucketSeriesSeqs)
		// Each key takes the store's seq of its report (series_seqs.go),
		// in the order the reports came: a new numbering starts after
		// what was stored before its first report.
		states := map[uint32]*seqState{}
		kept := order[:0]
		for _, i := range order {
			it := &items[i]
			src := binary.BigEndian.Uint32(it.key)
			st := states[src]
			if st == nil {
				var err error
				if st, err = decodeSeqState(sb.Get(it.key[:4])); err != nil {
					return err
				}
				states[src] = st
			}
			r := &reports[i]
			seq, ok := st.storedSeq(hb, src, r.SeqEpoch, r.Seq)
			if !ok {
				it.err = fmt.Errorf("%w: seq %d of seq_epoch %d is past the seqs the store can number after this source's", series.ErrInvalid, r.Seq, r.SeqEpoch)
				continue
			}
			if seq == 0 {
				continue // older than the numberings kept: a resend (stored[i] false)
			}
			binary.BigEndian.PutUint64(it.key[4:], seq)
			kept = append(kept, i)
		}
		order = kept
		slices.SortStableFunc(order, func(a, b int) int { return bytes.Compare(items[a].key, items[b].key) })
		for n, i := range order {
			it := &items[i]
			if n > 0 && bytes.Equal(items[order[n-1]].key, it.key) || hb.Get(it.key) != nil ||
				states[binary.BigEndian.Uint32(it.key)].ranges.contains(binary.BigEndian.Uint64(it.key[4:])) {
				continue
			}
			if err := hb.Put(it.key, it.val); err != nil {
				return err
			}
			stored[i] = true
		}
		for src, st := range states {
			if st.dirty {
				if err := sb.Put(binary.BigEndian.AppendUint32(nil, src), st.encode()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	releaseHeads(items) // bbolt holds values only until the transaction ends
	if err != nil {
		return nil, fmt.Errorf("store series reports: %w", err)
	}
	s.nodes.add(fresh)
	for i := range items {
		if items[i].err != nil {
			refuse(i, items[i].err)
		}
	}
	if len(refused) > 0 {
		slices.SortFunc(refused, func(a, b ReportError) int { return cmp.Compare(a.Index, b.Index) })
		return stored, refused
	}
	return stored, nil
}

func cmpEntry(a, b headEntry) int {
	if c := cmp.Compare(a.dst, b.dst); c != 0 {
		return c
	}
	return cmp.Compare(a.pk, b.pk)
}

// dupEntry is the index of the first entry equal to its predecessor, or -1.
func dupEntry(entries []headEntry) int {
	for j := 1; j < len(entries); j++ {
		if cmpEntry(entries[j-1], entries[j]) == 0 {
			return j
		}
	}
	return -1
}

// validKey checks a series key; the error wraps ErrInvalid.
func validKey(k series.Key) error {
	for _, err := range []error{series.ValidNode("src", k.Src), series.ValidNode("dst", k.Dst),
		series.ValidPath("path", k.Path), series.ValidKind("kind", k.Kind), series.ValidFamily("family", k.Family)} {
		if err != nil {
			return fmt.Errorf("%w: series key: %w", ErrInvalid, err)
		}
	}
	return nil
}

// readable is the check every read of a series starts with: k is valid
// (else ErrInvalid) and ctx is not done (else its error).
func readable(ctx context.Context, k series.Key) error {
	if err := validKey(k); err != nil {
		return err
	}
	return ctx.Err()
}

// Series returns the samples of series k whose Start is in [from, to)
// (a zero from: since the epoch; a zero to: no end), from its chunks and
// the head, in Start order, each Start once (a chunk's sample wins over
// a head's of the same Start). Round trips come back at
// series.RTTResolution, times in UTC. An unknown series has no samples;
// an invalid key is refused with ErrInvalid.
func (s *Store) Series(ctx context.Context, k series.Key, from, to time.Time) ([]series.Sample, error) {
	return s.readSeries(ctx, k, from, to, 0)
}

// readSeries is Series; a limit above 0 lets it stop reading chunks once
// more than limit samples are sure to precede the rest, so the first
// limit+1 samples it returns are those of Series (a page and one more).
func (s *Store) readSeries(ctx context.Context, k series.Key, from, to time.Time, limit int) ([]series.Sample, error) {
	if err := readable(ctx, k); err != nil {
		return nil, err
	}
	if from.Before(time.Unix(0, 1)) {
		from = time.Unix(0, 1)
	}
	if !to.IsZero() && !from.Before(to) {
		return nil, nil
	}
	var out, fromHead []series.Sample
	err := s.viewSeries(k, func(tx *bolt.Tx, src, dst uint32, pk byte) (err error) {
		prefix := seriesPrefix(src, dst, pk)
		c := tx.Bucket(bucketSeriesChunks).Cursor()
		var chunks [][]byte // valid for the transaction
		size, first := 0, 0
		for ck, v := c.Seek(chunkKey(src, dst, pk, blockOf(from.UnixNano()))); ck != nil && bytes.HasPrefix(ck, prefix); ck, v = c.Next() {
			if !to.IsZero() && int64(binary.BigEndian.Uint64(ck[10:])) >= to.UnixNano() {
				break
			}
			n, err := series.ChunkLen(v)
			if err != nil {
				return fmt.Errorf("%w: chunk %x: %w", ErrCorrupt, ck, err)
			}
			chunks, size = append(chunks, v), size+n
			if len(chunks) == 1 {
				first = n
			}
			// Chunks after the first hold only samples at or after from
			// (the last may pass to, but then no chunk follows): once they
			// hold more than limit, later blocks cannot make the first
			// limit+1, whatever the head adds.
			if limit > 0 && size-first > limit {
				break
			}
		}
		out = make([]series.Sample, 0, size)
		for _, v := range chunks {
			if out, err = series.AppendChunk(out, v, from, to); err != nil {
				return fmt.Errorf("%w: chunk: %w", ErrCorrupt, err)
			}
		}
		hc := tx.Bucket(bucketSeriesHead).Cursor()
		var smp series.Sample
		for hk, v := hc.Seek(prefix[:4]); hk != nil && bytes.HasPrefix(hk, prefix[:4]); hk, v = hc.Next() {
			h, err := parseHead(v)
			if err != nil {
				return err
			}
			if h.start.Before(from) || !to.IsZero() && !h.start.Before(to) {
				continue
			}
			if found, err := h.find(dst, pk, &smp); err != nil {
				return err
			} else if found {
				fromHead = append(fromHead, smp)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read series %v: %w", k, err)
	}
	if len(fromHead) == 0 {
		return out, nil
	}
	return mergeSamples(out, fromHead), nil
}

// viewSeries runs fn in a read transaction with k's node IDs (src, dst)
// and packed path key (pk) resolved; fn is not called for a series whose
// nodes were never stored, which has nothing to read. It returns fn's
// error, or the lookup's.
func (s *Store) viewSeries(k series.Key, fn func(tx *bolt.Tx, src, dst uint32, pk byte) error) error {
	pk := packPK(k.Path, k.Kind, k.Family)
	return s.db.View(func(tx *bolt.Tx) error {
		in := interner{tx: tx, cache: &s.nodes}
		src, dst, ok, err := in.lookupPair(k)
		if err != nil || !ok {
			return err
		}
		return fn(tx, src, dst, pk)
	})
}

// mergeSamples is a (sorted, distinct) and b merged in Start order, each
// Start once, a's sample winning.
func mergeSamples(a, b []series.Sample) []series.Sample {
	all := slices.Concat(a, b)
	slices.SortStableFunc(all, func(x, y series.Sample) int { return x.Start.Compare(y.Start) })
	return slices.CompactFunc(all, func(x, y series.Sample) bool { return x.Start.Equal(y.Start) })
}

// SeriesStats is what SeriesStats counts.
type SeriesStats struct {
	// Samples is every stored sample: ChunkSamples + HeadSamples.
	Samples, ChunkSamples, HeadSamples int64
	// Chunks counts the chunk keys.
	Chunks int64
	// HeadReports counts the reports waiting in the head for CompactSeries.
	HeadReports int64
	// Nodes counts the interned node names.
	Nodes int64
	// FileBytes is the store file's size on disk: its allocated blocks, as
	// du counts them (bbolt grows the file ahead of its pages in holes
	// that take no disk); DataBytes the size of its pages (free pages
	// included).
	FileBytes, DataBytes int64
}

// SeriesStats counts the stored series data. It reads every chunk's and
// head report's header: a full scan, for measuring, not for every
// request.
func (s *Store) SeriesStats(ctx context.Context) (SeriesStats, error) {
	var st SeriesStats
	if err := ctx.Err(); err != nil {
		return st, err
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		st.DataBytes = tx.Size()
		st.Nodes = int64(tx.Bucket(bucketSeriesNodes).Stats().KeyN)
		err := tx.Bucket(bucketSeriesChunks).ForEach(func(k, v []byte) error {
			n, err := series.ChunkLen(v)
			if err != nil {
				return fmt.Errorf("%w: chunk %x: %w", ErrCorrupt, k, err)
			}
			st.Chunks++
			st.ChunkSamples += int64(n)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketSeriesHead).ForEach(func(k, v []byte) error {
			h, err := parseHead(v)
			if err != nil {
				return err
			}
			st.HeadReports++
			st.HeadSamples += int64(h.n)
			return nil
		})
	})
	if err != nil {
		return st, fmt.Errorf("series stats: %w", err)
	}
	st.Samples = st.ChunkSamples + st.HeadSamples
	fi, err := os.Stat(s.db.Path())
	if err != nil {
		return st, fmt.Errorf("series stats: %w", err)
	}
	st.FileBytes = fi.Size()
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.FileBytes = sys.Blocks * 512 // st_blocks counts 512-byte units
	}
	return st, nil
}
