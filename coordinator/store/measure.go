package store

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
)

// RawRatio measures the series write path against bbolt itself, for
// benchmarks (meshlab bench-scale): it stores reports with AppendReports
// into a new store in dir, in batches of batch reports, then writes the
// same head keys and values straight into a new bbolt file in
// transactions of 1,000 keys, and returns AppendReports' throughput over
// the raw writer's (1.0: no overhead). Both files are left in dir.
func RawRatio(ctx context.Context, dir string, reports []series.Report, batch int) (float64, error) {
	if len(reports) == 0 || batch < 1 {
		return 0, fmt.Errorf("%w: RawRatio needs reports and a batch of at least 1", ErrInvalid)
	}
	s, err := Open(Config{Path: filepath.Join(dir, "ratio-store.db")})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	start := time.Now()
	for i := 0; i < len(reports); i += batch {
		if _, err := s.AppendReports(ctx, reports[i:min(i+batch, len(reports))]); err != nil {
			return 0, err
		}
	}
	tStore := time.Since(start)
	var keys, vals [][]byte
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSeriesHead).ForEach(func(k, v []byte) error {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	raw, err := bolt.Open(filepath.Join(dir, "ratio-raw.db"), 0o600, nil)
	if err != nil {
		return 0, err
	}
	defer raw.Close()
	start = time.Now()
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
	tRaw := time.Since(start)
	return tRaw.Seconds() / tStore.Seconds(), nil
}
