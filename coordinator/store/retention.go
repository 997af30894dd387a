package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// RollUp replaces the results that started before cutoff (truncated to
// the hour, so an hour is never split) by the rollups fold makes of them:
// pair by pair, in one transaction per pair, it reads the pair's old
// results, writes fold's rollups and deletes the results and their index
// entries. It stops after a pair once maxResults (0: 10,000) are
// rolled and returns how many; call it until it returns 0.
func (s *Store) RollUp(ctx context.Context, cutoff time.Time, maxResults int, fold func([]*measurev1.Result) []*measurev1.Rollup) (int, error) {
	if maxResults <= 0 {
		maxResults = 10000
	}
	// Cut at an hour boundary so that an hour is never split between two
	// passes.
	cutoff = cutoff.UTC().Truncate(time.Hour)
	pairs, err := s.oldPairs(ctx, cutoff)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, prefix := range pairs {
		if total >= maxResults {
			break
		}
		n, err := s.rollPair(ctx, prefix, cutoff, fold)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// oldPairs lists the pair prefixes that have results before cutoff.
func (s *Store) oldPairs(ctx context.Context, cutoff time.Time) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var pairs [][]byte
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketResults).Cursor()
		for k, _ := c.First(); k != nil; {
			dk, err := decodeResultKey(k)
			if err != nil {
				return err
			}
			prefix := pairPrefix(nil, dk.src, dk.dst)
			if dk.start.Before(cutoff) {
				pairs = append(pairs, prefix)
			}
			// Skip to the next pair: the first key after every key of this one.
			k, _ = c.Seek(append(bytes.Clone(prefix[:len(prefix)-1]), sep+1))
		}
		return nil
	})
	return pairs, err
}

// rollPair folds and deletes one pair's results before cutoff.
func (s *Store) rollPair(ctx context.Context, prefix []byte, cutoff time.Time, fold func([]*measurev1.Result) []*measurev1.Rollup) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		res, roll := tx.Bucket(bucketResults), tx.Bucket(bucketRollups)
		rt := openResultTx(tx)
		end := append(bytes.Clone(prefix), timeBytes(cutoff)...)
		var (
			keys    [][]byte
			results []*measurev1.Result
		)
		c := res.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
			r := &measurev1.Result{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decode result %q: %w", k, err)
			}
			keys, results = append(keys, bytes.Clone(k)), append(results, r)
		}
		for _, ru := range fold(results) {
			v, err := proto.Marshal(ru)
			if err != nil {
				return fmt.Errorf("encode rollup: %w", err)
			}
			k := rollupKey(ru.GetSrcNode(), ru.GetDstNode(), ru.GetHourStart().AsTime(), int32(ru.GetPath()),
				int32(ru.GetSpec().GetTest()), rollupParams(ru))
			if err := roll.Put(k, v); err != nil {
				return err
			}
		}
		for i, k := range keys {
			if err := rt.delete(results[i].GetRunId(), k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll up results: %w", err)
	}
	return n, nil
}

// paramsText is a stable text of a spec's parameters for keys.
func paramsText(spec *measurev1.TestSpec) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	return string(b)
}

// DeleteRunsBefore deletes the runs that ended before cutoff (their
// headers and plans; their results go by RollUp) and returns how many.
func (s *Store) DeleteRunsBefore(ctx context.Context, cutoff time.Time) (int, error) {
	old, err := s.Runs(ctx)
	if err != nil {
		return 0, err
	}
	var ids [][]byte
	for _, r := range old {
		if r.GetEndTime() != nil && r.GetEndTime().AsTime().Before(cutoff) {
			ids = append(ids, []byte(r.GetRunId()))
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	err = s.batch(ctx, func(tx *bolt.Tx) error {
		for _, id := range ids {
			if err := tx.Bucket(bucketRuns).Delete(id); err != nil {
				return err
			}
			if err := tx.Bucket(bucketRunPlanned).Delete(id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}

// Size returns the store file's size in bytes.
func (s *Store) Size() (int64, error) {
	var size int64
	err := s.db.View(func(tx *bolt.Tx) error {
		size = tx.Size()
		return nil
	})
	return size, err
}

// rollupParams is the params part of a rollup's key: the spec's parameter
// text, and for an IPv6 rollup a 0x00 and "ipv6" after it (parameter
// texts hold no 0x00), so the IPv4 and IPv6 rollups of one hour keep
// apart while IPv4 keys stay as they were before families.
func rollupParams(ru *measurev1.Rollup) string {
	p := paramsText(ru.GetSpec())
	if ru.GetIpFamily() == measurev1.IPFamily_IP_FAMILY_IPV6 {
		p += "\x00ipv6"
	}
	return p
}
