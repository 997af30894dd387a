package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
)

// maxCompactSamples bounds the samples one CompactSeries transaction
// takes from the head (about 8 MB of chunks in memory); a source with more
// pending takes several transactions.
const maxCompactSamples = 1 << 20

// chunkFill is the bbolt fill percent of the chunk bucket: chunks are
// never updated in place by small steps, so pages are split full.
const chunkFill = 0.95

// CompactSeries moves the head reports whose period ended at or before
// `before` into per-series chunks and deletes them from the head,
// source by source, in transactions of at most maxCompactSamples
// samples (memory stays bounded whatever the backlog). Each sample goes
// to the chunk of its series and SeriesBlock; a chunk that exists already
// is decoded and rewritten with the new samples merged in (a Start it
// holds already is kept, not duplicated), so calling it at block
// boundaries (e.g. before = now truncated to SeriesBlock) writes each
// chunk once. The seqs of the moved reports are remembered, so that a
// resend is still refused by AppendReports. It returns the samples added
// to chunks; on an error, the transactions before it stay committed.
func (s *Store) CompactSeries(ctx context.Context, before time.Time) (int, error) {
	srcs, err := s.seriesSources(ctx, bucketSeriesHead)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, src := range srcs {
		for resume := headKey(src, 0); resume != nil; {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			var n int
			n, resume, err = s.compactSource(resume, before)
			total += n
			if err != nil {
				return total, fmt.Errorf("compact series: %w", err)
			}
		}
	}
	return total, nil
}

// seriesSources lists the source IDs that have keys in bucket (keys
// starting with srcID(4)), one cursor seek per source.
func (s *Store) seriesSources(ctx context.Context, buckets ...[]byte) ([]uint32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var srcs []uint32
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			c := tx.Bucket(b).Cursor()
			for k, _ := c.First(); k != nil; {
				if len(k) < 4 {
					return fmt.Errorf("%w: series key %x", ErrCorrupt, k)
				}
				src := binary.BigEndian.Uint32(k)
				srcs = append(srcs, src)
				if src == 1<<32-1 {
					break
				}
				k, _ = c.Seek(binary.BigEndian.AppendUint32(nil, src+1))
			}
		}
		return nil
	})
	slices.Sort(srcs)
	return slices.Compact(srcs), err
}

// bufKey names one chunk of the source being compacted.
type bufKey struct {
	dst   uint32
	pk    byte
	block int64
}

// seriesBuf gathers the new samples of one chunk: in order in enc, the
// rare one that comes earlier than the last (a late report) in late.
type seriesBuf struct {
	enc  series.Encoder
	last int64
	late []series.Sample
}

func (b *seriesBuf) add(s series.Sample) error {
	if ns := s.Start.UnixNano(); b.enc.Len() == 0 || ns > b.last {
		if err := b.enc.Append(s); err != nil {
			return fmt.Errorf("%w: head sample: %w", ErrCorrupt, err)
		}
		b.last = ns
		return nil
	}
	b.late = append(b.late, s)
	return nil
}

// chunk is the chunk value of the buffer merged into the existing chunk
// (nil if none) and the number of samples added to it.
func (b *seriesBuf) chunk(existing []byte) ([]byte, int, error) {
	if existing == nil && len(b.late) == 0 {
		return b.enc.Bytes(), b.enc.Len(), nil
	}
	var old []series.Sample
	if existing != nil {
		var err error
		if old, err = series.DecodeChunk(existing); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	mine, err := series.DecodeChunk(b.enc.Bytes())
	if err != nil {
		return nil, 0, err
	}
	all := mergeSamples(old, append(mine, b.late...))
	v, err := series.EncodeChunk(all)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return v, len(all) - len(old), nil
}

// compactSource compacts one source's head from key `from` on, in one
// transaction; resume is where the next one starts (nil: done).
func (s *Store) compactSource(from []byte, before time.Time) (n int, resume []byte, err error) {
	prefix := from[:4]
	err = s.db.Update(func(tx *bolt.Tx) error {
		n, resume = 0, nil
		hb, cb, sb := tx.Bucket(bucketSeriesHead), tx.Bucket(bucketSeriesChunks), tx.Bucket(bucketSeriesSeqs)
		bufs := map[bufKey]*seriesBuf{}
		var (
			done    [][]byte
			seqs    []uint64
			samples int
		)
		c := hb.Cursor()
		for k, v := c.Seek(from); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if samples >= maxCompactSamples {
				resume = bytes.Clone(k)
				break
			}
			h, err := parseHead(v)
			if err != nil {
				return err
			}
			if h.end().After(before) {
				continue
			}
			block := blockOf(h.start.UnixNano())
			err = h.each(func(dst uint32, pk byte, smp *series.Sample) error {
				key := bufKey{dst: dst, pk: pk, block: block}
				b := bufs[key]
				if b == nil {
					b = &seriesBuf{}
					bufs[key] = b
				}
				return b.add(*smp)
			})
			if err != nil {
				return fmt.Errorf("head report %x: %w", k, err)
			}
			samples += h.n
			done = append(done, bytes.Clone(k))
			seqs = append(seqs, binary.BigEndian.Uint64(k[4:]))
		}
		if len(done) == 0 {
			return nil
		}
		keys := make([]bufKey, 0, len(bufs))
		for k := range bufs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b bufKey) int {
			if c := cmp.Compare(a.dst, b.dst); c != 0 {
				return c
			}
			if c := cmp.Compare(a.pk, b.pk); c != 0 {
				return c
			}
			return cmp.Compare(a.block, b.block)
		})
		cb.FillPercent = chunkFill
		src := binary.BigEndian.Uint32(prefix)
		for _, key := range keys {
			ck := chunkKey(src, key.dst, key.pk, key.block)
			v, added, err := bufs[key].chunk(cb.Get(ck))
			if err != nil {
				return fmt.Errorf("chunk %x: %w", ck, err)
			}
			if err := cb.Put(ck, v); err != nil {
				return err
			}
			n += added
		}
		for _, k := range done {
			if err := hb.Delete(k); err != nil {
				return err
			}
		}
		return rememberSeqs(sb, prefix, seqs)
	})
	return n, resume, err
}

// rememberSeqs adds seqs (sorted, the store's) to the source's
// seqRanges.
func rememberSeqs(sb *bolt.Bucket, prefix []byte, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	st, err := decodeSeqState(sb.Get(prefix))
	if err != nil {
		return err
	}
	st.ranges = st.ranges.add(seqs)
	return sb.Put(bytes.Clone(prefix), st.encode())
}

// DeleteSeriesBefore deletes the chunks whose block ended at or before
// cutoff (whole chunks: a block that straddles cutoff stays) and the head
// reports whose period ended at or before it, source by source, one
// transaction each; it returns the samples deleted. The deleted reports'
// seqs are remembered (AppendReports still refuses them as resends).
func (s *Store) DeleteSeriesBefore(ctx context.Context, cutoff time.Time) (int, error) {
	srcs, err := s.seriesSources(ctx, bucketSeriesChunks, bucketSeriesHead)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := s.deleteSource(src, cutoff)
		total += n
		if err != nil {
			return total, fmt.Errorf("delete series: %w", err)
		}
	}
	return total, nil
}

func (s *Store) deleteSource(src uint32, cutoff time.Time) (n int, err error) {
	prefix := binary.BigEndian.AppendUint32(nil, src)
	lastBlock := cutoff.UnixNano() - int64(SeriesBlock) // blocks starting at or before it ended by cutoff
	err = s.db.Update(func(tx *bolt.Tx) error {
		n = 0
		cb, hb := tx.Bucket(bucketSeriesChunks), tx.Bucket(bucketSeriesHead)
		var old [][]byte
		c := cb.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); {
			if len(k) != 18 {
				return fmt.Errorf("%w: chunk key %x", ErrCorrupt, k)
			}
			if int64(binary.BigEndian.Uint64(k[10:])) <= lastBlock {
				m, err := series.ChunkLen(v)
				if err != nil {
					return fmt.Errorf("%w: chunk %x: %w", ErrCorrupt, k, err)
				}
				n += m
				old = append(old, bytes.Clone(k))
				k, v = c.Next()
				continue
			}
			// The rest of this series is newer: on to the next series.
			k, v = nextSeries(c, k)
		}
		var seqs []uint64
		hc := hb.Cursor()
		for k, v := hc.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = hc.Next() {
			h, err := parseHead(v)
			if err != nil {
				return err
			}
			if !h.end().After(cutoff) {
				n += h.n
				old = append(old, bytes.Clone(k))
				seqs = append(seqs, binary.BigEndian.Uint64(k[4:]))
			}
		}
		for _, k := range old {
			b := cb
			if len(k) == 12 {
				b = hb
			}
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return rememberSeqs(tx.Bucket(bucketSeriesSeqs), prefix, seqs)
	})
	return n, err
}
