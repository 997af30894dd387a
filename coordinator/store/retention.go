package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// RollUp replaces the results that started before cutoff (truncated to
// the hour, so an hour is never split) by the rollups fold makes of them:
// pair by pair, it reads the pair's old results, writes fold's rollups
// and deletes the results and their index entries, in transactions of
// whole hours of at most about maxResults (0: 10,000) results each (one
// hour that holds more is one transaction), so that a backlog (retention
// enabled on a full store, a coordinator stopped for weeks) is rolled in
// bounded memory. A rollup for an hour already rolled (results that
// came after its pass, or a clock stepped back) is merged into the
// stored one (mergeRollup), never written over it. It stops once
// maxResults are rolled and returns how many; call it until it returns 0.
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
		for more := true; more && total < maxResults; {
			n, cut, err := s.rollPair(ctx, prefix, cutoff, maxResults-total, fold)
			if err != nil {
				return total, err
			}
			total, more = total+n, cut
		}
		if total >= maxResults {
			break
		}
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

// rollPair folds and deletes one pair's oldest results before cutoff:
// whole hours, up to the hour in which the limit-th result started; cut
// says it stopped there with older results of the pair left.
func (s *Store) rollPair(ctx context.Context, prefix []byte, cutoff time.Time, limit int, fold func([]*measurev1.Result) []*measurev1.Rollup) (n int, cut bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		res, roll := tx.Bucket(bucketResults), tx.Bucket(bucketRollups)
		rt := openResultTx(tx)
		end := append(bytes.Clone(prefix), timeBytes(cutoff)...)
		var (
			keys    [][]byte
			results []*measurev1.Result
		)
		c := res.Cursor()
		var hour time.Time // of the last result read
		for k, v := c.Seek(prefix); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
			dk, err := decodeResultKey(k)
			if err != nil {
				return err
			}
			h := dk.start.UTC().Truncate(time.Hour)
			if len(keys) >= limit && !h.Equal(hour) {
				cut = true
				break // the rest in another transaction, from this hour on
			}
			hour = h
			r := &measurev1.Result{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decode result %q: %w", k, err)
			}
			keys, results = append(keys, bytes.Clone(k)), append(results, r)
		}
		for _, ru := range fold(results) {
			k := rollupKey(ru.GetSrcNode(), ru.GetDstNode(), ru.GetHourStart().AsTime(), int32(ru.GetPath()),
				int32(ru.GetSpec().GetTest()), rollupParams(ru))
			if old := roll.Get(k); old != nil {
				prev := &measurev1.Rollup{}
				if err := proto.Unmarshal(old, prev); err != nil {
					return fmt.Errorf("decode rollup %q: %w", k, err)
				}
				ru = mergeRollup(prev, ru)
			}
			v, err := proto.Marshal(ru)
			if err != nil {
				return fmt.Errorf("encode rollup: %w", err)
			}
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
		return 0, false, fmt.Errorf("roll up results: %w", err)
	}
	return n, cut, nil
}

// mergeRollup folds b, a rollup of the same pair, path, test and hour as
// a that was rolled later, into a: counts add (samples and each failed
// status), min and max are the extremes, the mean is weighted by samples
// and the median is the median of the part with more samples (the
// results are gone: the exact median of both is not known).
func mergeRollup(a, b *measurev1.Rollup) *measurev1.Rollup {
	out := proto.CloneOf(a)
	na, nb := float64(a.GetSamples()), float64(b.GetSamples())
	switch {
	case nb == 0:
	case na == 0:
		out.MinValue, out.MedianValue, out.MaxValue, out.MeanValue = b.GetMinValue(), b.GetMedianValue(), b.GetMaxValue(), b.GetMeanValue()
	default:
		out.MinValue, out.MaxValue = min(a.GetMinValue(), b.GetMinValue()), max(a.GetMaxValue(), b.GetMaxValue())
		out.MeanValue = (a.GetMeanValue()*na + b.GetMeanValue()*nb) / (na + nb)
		if nb > na {
			out.MedianValue = b.GetMedianValue()
		}
	}
	out.Samples = a.GetSamples() + b.GetSamples()
	for _, f := range b.GetFailed() {
		i := slices.IndexFunc(out.Failed, func(c *measurev1.StatusCount) bool { return c.GetStatus() == f.GetStatus() })
		if i < 0 {
			out.Failed = append(out.Failed, proto.CloneOf(f))
			continue
		}
		out.Failed[i].Count += f.GetCount()
	}
	slices.SortFunc(out.Failed, func(x, y *measurev1.StatusCount) int { return int(x.GetStatus()) - int(y.GetStatus()) })
	return out
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
