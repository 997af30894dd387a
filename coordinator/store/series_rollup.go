package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
)

// The probe series' long history: RollUpSeries replaces the chunks past
// the raw retention by hourly points (series.Rollup) in rollup chunks
// (bucketSeriesRollups, one key per series and SeriesRollupBlock), the
// rollup write and the raw delete in one transaction per batch;
// DeleteSeriesRollupsBefore deletes rollup chunks past the rollup
// retention; SeriesRollups and ListSeries read them.

// seriesRollupBatch is the raw chunks one RollUpSeries transaction rolls
// up (about 5 MB of chunks at 10 s periods, decoded one at a time), and
// rollupDeleteBatch the rollup chunks one DeleteSeriesRollupsBefore
// transaction deletes: memory and transaction size stay bounded
// whatever the fleet.
const (
	seriesRollupBatch = 1024
	rollupDeleteBatch = 4096
)

// SeriesRollupCounts is what RollUpSeries did.
type SeriesRollupCounts struct {
	// Chunks counts the raw chunks rolled up and deleted.
	Chunks int
	// Samples counts their samples (report periods).
	Samples int
	// Points counts the hourly points written: new ones and those a late
	// chunk merged into.
	Points int
	// Batches counts the transactions committed.
	Batches int
	// Done is true once no chunk ended at or before the cutoff is left.
	Done bool
	// Quarantined are the chunks and rollup chunks that did not decode,
	// moved to the quarantine bucket instead of rolled up: each an error
	// wrapping ErrCorrupt that names the bucket and key (for the log).
	Quarantined []error
}

func (c *SeriesRollupCounts) add(d SeriesRollupCounts) {
	c.Chunks, c.Samples, c.Points, c.Batches = c.Chunks+d.Chunks, c.Samples+d.Samples, c.Points+d.Points, c.Batches+d.Batches
	c.Quarantined = append(c.Quarantined, d.Quarantined...)
}

// quarantine moves key of bucket b (named name) to the quarantine bucket,
// as name, sep, key -> value, in tx; why is recorded in c.
func quarantine(tx *bolt.Tx, b *bolt.Bucket, name, key []byte, why error, c *SeriesRollupCounts) error {
	qk := append(append(append(make([]byte, 0, len(name)+1+len(key)), name...), sep), key...)
	if err := tx.Bucket(bucketSeriesQuarantine).Put(qk, bytes.Clone(b.Get(key))); err != nil {
		return err
	}
	if err := b.Delete(key); err != nil {
		return err
	}
	c.Quarantined = append(c.Quarantined, fmt.Errorf("%w (moved to %s)", why, bucketSeriesQuarantine))
	return nil
}

// RollUpSeries rolls up and deletes the probe series' chunks whose block
// ended at or before cutoff (whole chunks, as DeleteSeriesBefore; head
// reports that ended by cutoff are compacted into chunks first, so they
// are rolled up too). Each chunk's samples are folded per series and
// hour (series.Folder.FoldChunk) and merged into the series' rollup
// chunk of that day; the rollup chunks' writes and the raw chunks'
// deletes of a batch (at most seriesRollupBatch raw chunks, in key
// order) are one transaction, so a coordinator killed mid-pass leaves
// every hour either rolled up and deleted or raw, never both or
// neither, and the next pass goes on where it stopped. An hour rolled up
// again later (a late report's chunk of an hour already rolled up) is
// merged into its point (series.Folder.Merge), not added twice.
//
// It stops after maxBatches transactions (0: when done). A chunk that
// does not decode (or whose rollup chunk does not) does not stop it: it
// is moved, as it is, to the quarantine bucket in the same transaction
// and named in the counts' Quarantined, so that retention goes on and
// nothing is lost.
func (s *Store) RollUpSeries(ctx context.Context, cutoff time.Time, maxBatches int) (SeriesRollupCounts, error) {
	var c SeriesRollupCounts
	if _, err := s.CompactSeries(ctx, cutoff); err != nil {
		return c, fmt.Errorf("roll up series: %w", err)
	}
	lastBlock := cutoff.UnixNano() - int64(SeriesBlock) // blocks starting at or before it ended by cutoff
	var resume []byte
	for batch := 0; maxBatches <= 0 || batch < maxBatches; batch++ {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		d, next, err := s.rollUpBatch(resume, lastBlock, batch)
		if err != nil {
			return c, fmt.Errorf("roll up series: %w", err)
		}
		if d.Chunks > 0 {
			d.Batches = 1
		}
		c.add(d)
		if next == nil {
			c.Done = true
			break
		}
		resume = next
	}
	return c, nil
}

// rollUpBatch rolls up the old chunks from key from (nil: the first) on,
// in one transaction; resume is where the next batch starts (nil: done).
func (s *Store) rollUpBatch(from []byte, lastBlock int64, batch int) (c SeriesRollupCounts, resume []byte, err error) {
	limit := s.rollupBatch
	if limit <= 0 {
		limit = seriesRollupBatch
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		c, resume = SeriesRollupCounts{}, nil
		cb, rb := tx.Bucket(bucketSeriesChunks), tx.Bucket(bucketSeriesRollups)
		var (
			f       series.Folder
			samples []series.Sample
			points  []series.Rollup // of pending's rollup chunk
			pending []byte
			del     [][]byte
		)
		flush := func() error {
			if len(points) > 0 {
				if err := writeRollups(tx, rb, &f, pending, points, &c); err != nil {
					return err
				}
				c.Points += len(points)
			}
			pending, points = nil, points[:0]
			return nil
		}
		cur := cb.Cursor()
		k, v := cur.First()
		if from != nil {
			k, v = cur.Seek(from)
		}
		for k != nil {
			if len(k) != 18 {
				bad := bytes.Clone(k)
				k, v = cur.Next()
				if err := quarantine(tx, cb, bucketSeriesChunks, bad,
					fmt.Errorf("%w: %s: a chunk key has 18 bytes", ErrCorrupt, describeKey(tx, bucketSeriesChunks, bad)), &c); err != nil {
					return err
				}
				if k != nil {
					k, v = cur.Seek(bytes.Clone(k)) // the delete may have moved the cursor
				}
				continue
			}
			block := int64(binary.BigEndian.Uint64(k[10:]))
			if block > lastBlock {
				// The rest of this series is newer: on to the next series.
				k, v = nextSeries(cur, k)
				continue
			}
			if len(del) >= limit {
				resume = bytes.Clone(k)
				break
			}
			var err error
			var why error
			if samples, err = series.AppendChunk(samples[:0], v, time.Time{}, time.Time{}); err != nil {
				why = fmt.Errorf("%w: %s: %w", ErrCorrupt, describeKey(tx, bucketSeriesChunks, k), err)
			} else if n := len(samples); n > 0 && (samples[0].Start.UnixNano() < block || samples[n-1].Start.UnixNano() >= block+int64(SeriesBlock)) {
				why = fmt.Errorf("%w: %s: samples from %v to %v outside the chunk's block", ErrCorrupt,
					describeKey(tx, bucketSeriesChunks, k), samples[0].Start, samples[n-1].Start)
			}
			if why != nil {
				bad := bytes.Clone(k)
				k, v = cur.Next()
				if err := quarantine(tx, cb, bucketSeriesChunks, bad, why, &c); err != nil {
					return err
				}
				if k != nil {
					k, v = cur.Seek(bytes.Clone(k))
				}
				continue
			}
			rk := binary.BigEndian.AppendUint64(bytes.Clone(k[:10]), uint64(rollupBlockOf(block)))
			if pending != nil && !bytes.Equal(pending, rk) {
				if err := flush(); err != nil {
					return err
				}
			}
			pending = rk
			points = f.FoldChunk(points, samples)
			del = append(del, bytes.Clone(k))
			c.Chunks++
			c.Samples += len(samples)
			k, v = cur.Next()
		}
		if err := flush(); err != nil {
			return err
		}
		for _, k := range del {
			if err := cb.Delete(k); err != nil {
				return err
			}
		}
		if s.rollupFault != nil {
			return s.rollupFault(batch)
		}
		return nil
	})
	return c, resume, err
}

// writeRollups merges points (sorted, of the block of key) into the
// rollup chunk at key; a rollup chunk there that does not decode is
// quarantined first (recorded in c), and points start a new one.
func writeRollups(tx *bolt.Tx, rb *bolt.Bucket, f *series.Folder, key []byte, points []series.Rollup, c *SeriesRollupCounts) error {
	var old []series.Rollup
	if v := rb.Get(key); v != nil {
		var err error
		if old, err = series.DecodeRollups(v); err != nil {
			old = nil
			why := fmt.Errorf("%w: %s: %w", ErrCorrupt, describeKey(tx, bucketSeriesRollups, key), err)
			if err := quarantine(tx, rb, bucketSeriesRollups, key, why, c); err != nil {
				return err
			}
		}
	}
	v, err := series.EncodeRollups(f.MergePoints(old, points))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, describeKey(tx, bucketSeriesRollups, key), err)
	}
	return rb.Put(key, v)
}

// describeKey names a chunk or rollup chunk key of bucket for an error:
// the bucket, the key in hex and, if it has the layout, its source and
// destination (by name when the IDs have one), path, kind and block.
func describeKey(tx *bolt.Tx, bucket, k []byte) string {
	out := fmt.Sprintf("%s key %x", bucket, k)
	if len(k) != 18 {
		return out
	}
	name := func(id []byte) string {
		if n := tx.Bucket(bucketSeriesNodeIDs).Get(id); n != nil {
			return fmt.Sprintf("%q", n)
		}
		return fmt.Sprintf("node id %d", binary.BigEndian.Uint32(id))
	}
	return fmt.Sprintf("%s (%s -> %s, path %d, kind %d, block %s)", out, name(k[:4]), name(k[4:8]), k[8], k[9],
		time.Unix(0, int64(binary.BigEndian.Uint64(k[10:]))).UTC().Format(time.RFC3339))
}

// DeleteSeriesRollupsBefore deletes the rollup chunks whose block ended
// at or before cutoff (whole SeriesRollupBlocks: a day that straddles
// cutoff stays), at most rollupDeleteBatch chunks a transaction, and
// returns the points deleted. A chunk whose header does not decode stops
// it with an error wrapping ErrCorrupt that names the key.
func (s *Store) DeleteSeriesRollupsBefore(ctx context.Context, cutoff time.Time) (int, error) {
	lastBlock := cutoff.UnixNano() - int64(SeriesRollupBlock)
	total := 0
	for resume := []byte{}; resume != nil; {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		err := s.db.Update(func(tx *bolt.Tx) error {
			rb := tx.Bucket(bucketSeriesRollups)
			var del [][]byte
			n := 0
			cur := rb.Cursor()
			k, v := cur.Seek(resume)
			resume = nil
			for k != nil {
				if len(k) != 18 {
					return fmt.Errorf("%w: %s: a rollup key has 18 bytes", ErrCorrupt, describeKey(tx, bucketSeriesRollups, k))
				}
				if int64(binary.BigEndian.Uint64(k[10:])) > lastBlock {
					k, v = nextSeries(cur, k)
					continue
				}
				if len(del) >= rollupDeleteBatch {
					resume = bytes.Clone(k)
					break
				}
				m, err := series.RollupsLen(v)
				if err != nil {
					return fmt.Errorf("%w: %s: %w", ErrCorrupt, describeKey(tx, bucketSeriesRollups, k), err)
				}
				n += m
				del = append(del, bytes.Clone(k))
				k, v = cur.Next()
			}
			for _, k := range del {
				if err := rb.Delete(k); err != nil {
					return err
				}
			}
			total += n
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("delete series rollups: %w", err)
		}
	}
	return total, nil
}

// SeriesRollups returns the hourly points of series k whose hour
// overlaps [from, to) (a zero from: since the epoch; a zero to: no end),
// in Start order. An unknown series has none; an invalid key is refused
// with ErrInvalid.
func (s *Store) SeriesRollups(ctx context.Context, k series.Key, from, to time.Time) ([]series.Rollup, error) {
	return s.readRollups(ctx, k, from, to, 0)
}

// readRollups is SeriesRollups; a limit above 0 stops it after limit
// points.
func (s *Store) readRollups(ctx context.Context, k series.Key, from, to time.Time, limit int) ([]series.Rollup, error) {
	if err := readable(ctx, k); err != nil {
		return nil, err
	}
	// The first hour that ends after from.
	first := max(from.UnixNano()-int64(series.RollupBucket)+1, 0)
	if from.IsZero() {
		first = 0
	}
	var out []series.Rollup
	err := s.viewSeries(k, func(tx *bolt.Tx, src, dst uint32, pk byte) error {
		prefix := seriesPrefix(src, dst, pk)
		c := tx.Bucket(bucketSeriesRollups).Cursor()
		for ck, v := c.Seek(chunkKey(src, dst, pk, rollupBlockOf(first))); ck != nil && bytes.HasPrefix(ck, prefix); ck, v = c.Next() {
			if len(ck) != 18 {
				return fmt.Errorf("%w: %s: a rollup key has 18 bytes", ErrCorrupt, describeKey(tx, bucketSeriesRollups, ck))
			}
			if !to.IsZero() && int64(binary.BigEndian.Uint64(ck[10:])) >= to.UnixNano() {
				break
			}
			points, err := series.DecodeRollups(v)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", ErrCorrupt, describeKey(tx, bucketSeriesRollups, ck), err)
			}
			for _, p := range points {
				if p.Start.UnixNano() < first || !to.IsZero() && !p.Start.Before(to) {
					continue
				}
				out = append(out, p)
				if limit > 0 && len(out) >= limit {
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read series rollups %v: %w", k, err)
	}
	return out, nil
}
