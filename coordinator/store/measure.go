package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
)

// RawRatio measures the series write path against bbolt itself, for
// benchmarks (meshlab bench-scale): it stores reports with AppendReports
// into a new store in dir, in batches of batch reports, then writes the
// same head keys and values straight into a new bbolt file (default
// options) in transactions of 1,000 keys, and returns AppendReports'
// throughput over the raw writer's (1.0: no overhead). Each side runs
// ratioRounds times, alternately, on new files, and the fastest run of
// each counts, so that a burst of other load on the machine does not
// decide the ratio. The files of the last round are left in dir.
func RawRatio(ctx context.Context, dir string, reports []series.Report, batch int) (float64, error) {
	if len(reports) == 0 || batch < 1 {
		return 0, fmt.Errorf("%w: RawRatio needs reports and a batch of at least 1", ErrInvalid)
	}
	var tStore, tRaw time.Duration
	for round := range ratioRounds {
		ts, keys, vals, err := timeStore(ctx, dir, reports, batch)
		if err != nil {
			return 0, err
		}
		tr, err := timeRaw(dir, keys, vals)
		if err != nil {
			return 0, err
		}
		if round == 0 || ts < tStore {
			tStore = ts
		}
		if round == 0 || tr < tRaw {
			tRaw = tr
		}
	}
	return tRaw.Seconds() / tStore.Seconds(), nil
}

// ratioRounds is how often RawRatio times each side.
const ratioRounds = 3

// timeStore is the time AppendReports takes to store reports in batches
// of batch into a new store in dir (ratio-store.db), and the head keys
// and values it wrote.
func timeStore(ctx context.Context, dir string, reports []series.Report, batch int) (time.Duration, [][]byte, [][]byte, error) {
	path := filepath.Join(dir, "ratio-store.db")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil, err
	}
	s, err := Open(Config{Path: path})
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = s.Close() }()
	start := time.Now()
	for i := 0; i < len(reports); i += batch {
		if _, err := s.AppendReports(ctx, reports[i:min(i+batch, len(reports))]); err != nil {
			return 0, nil, nil, err
		}
	}
	took := time.Since(start)
	var keys, vals [][]byte
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSeriesHead).ForEach(func(k, v []byte) error {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			return nil
		})
	})
	return took, keys, vals, err
}

// timeRaw is the time a bbolt file with default options (ratio-raw.db in
// dir, new) takes to store keys and vals in transactions of 1,000 keys.
func timeRaw(dir string, keys, vals [][]byte) (time.Duration, error) {
	path := filepath.Join(dir, "ratio-raw.db")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = raw.Close() }()
	start := time.Now()
	for i := 0; i < len(keys); i += 1000 {
		err := raw.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketSeriesHead)
			if err != nil {
				return err
			}
			for j := i; j < min(i+1000, len(keys)); j++ {
				if err := b.Put(keys[j], vals[j]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
