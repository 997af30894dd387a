package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// DefaultPageSize and MaxPageSize bound ListResults pages.
const (
	DefaultPageSize = 1000
	MaxPageSize     = 10000
)

// AddResults writes results in one batched transaction. Each needs
// test_id, run_id, src_node, dst_node and start_time; a result with the same
// (pair, start time, test ID, index) replaces the stored one, so a resend is
// harmless. Nothing is written if any result is refused (ErrInvalid).
func (s *Store) AddResults(ctx context.Context, results []*measurev1.Result) error {
	type kv struct{ k, rk, v []byte }
	rows := make([]kv, 0, len(results))
	for i, r := range results {
		for _, f := range []struct{ name, v string }{
			{"test_id", r.GetTestId()}, {"run_id", r.GetRunId()},
			{"src_node", r.GetSrcNode()}, {"dst_node", r.GetDstNode()},
		} {
			if err := validID(fmt.Sprintf("results[%d].%s", i, f.name), f.v); err != nil {
				return err
			}
		}
		if err := validStart(r.GetStartTime()); err != nil {
			return fmt.Errorf("%w: results[%d].start_time (test %s): %v", ErrInvalid, i, r.GetTestId(), err)
		}
		v, err := proto.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode result %s: %w", r.GetTestId(), err)
		}
		k := resultKey(r.GetSrcNode(), r.GetDstNode(), r.GetStartTime().AsTime(), r.GetRunId(), r.GetTestId(), r.GetIndex())
		rows = append(rows, kv{k: k, rk: runResultKey(r.GetRunId(), k), v: v})
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		res, byRun := tx.Bucket(bucketResults), tx.Bucket(bucketRunResults)
		for _, row := range rows {
			if err := res.Put(row.k, row.v); err != nil {
				return err
			}
			if err := byRun.Put(row.rk, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// validStart accepts a valid timestamp from the Unix epoch to year 2262
// (the range of int64 nanoseconds).
func validStart(ts *timestamppb.Timestamp) error {
	if ts == nil {
		return errors.New("unset")
	}
	if err := ts.CheckValid(); err != nil {
		return err
	}
	if ts.GetSeconds() < 0 || ts.GetSeconds() >= math.MaxInt64/int64(time.Second) {
		return fmt.Errorf("%v is outside 1970..2262", ts.AsTime())
	}
	return nil
}

// RunTestIDs returns the IDs of the tests of a run that have at least one
// stored result.
func (s *Store) RunTestIDs(ctx context.Context, runID string) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	prefix := append([]byte(runID), sep)
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRunResults).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			dk, err := decodeResultKey(k[len(prefix):])
			if err != nil {
				return err
			}
			ids[dk.testID] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("run %s test IDs: %w", runID, err)
	}
	return ids, nil
}

// Filter selects results; zero fields match everything.
type Filter struct {
	// SrcNode and DstNode select the node pair (either may be empty).
	SrcNode, DstNode string
	// Path selects one path.
	Path measurev1.Path
	// Test selects one test.
	Test measurev1.Test
	// RunID selects one run.
	RunID string
	// Since (inclusive) and Until (exclusive) bound the start time.
	Since, Until time.Time
}

func (f Filter) match(r *measurev1.Result) bool {
	switch {
	case f.SrcNode != "" && r.GetSrcNode() != f.SrcNode,
		f.DstNode != "" && r.GetDstNode() != f.DstNode,
		f.Path != measurev1.Path_PATH_UNSPECIFIED && r.GetPath() != f.Path,
		f.Test != measurev1.Test_TEST_UNSPECIFIED && r.GetSpec().GetTest() != f.Test,
		f.RunID != "" && r.GetRunId() != f.RunID:
		return false
	}
	return f.inTime(r.GetStartTime().AsTime())
}

func (f Filter) inTime(t time.Time) bool {
	return (f.Since.IsZero() || !t.Before(f.Since)) && (f.Until.IsZero() || t.Before(f.Until))
}

// ListResults returns up to pageSize results matching f (0 means
// DefaultPageSize; more than MaxPageSize is refused), ordered by source
// node, destination node and start time (by run, then that order, when
// f.RunID is set), and the token of the next page ("" on the last page).
// pageToken is "" or a token from an earlier call with the same filter; a
// token that does not decode wraps ErrInvalid.
func (s *Store) ListResults(ctx context.Context, f Filter, pageSize int, pageToken string) ([]*measurev1.Result, string, error) {
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return nil, "", fmt.Errorf("%w: start_time %v is not before end_time %v", ErrInvalid, f.Since, f.Until)
	}
	for _, b := range []struct {
		field string
		t     time.Time
	}{{"start_time", f.Since}, {"end_time", f.Until}} {
		if !b.t.IsZero() && (b.t.Before(time.Unix(0, 0)) || b.t.Year() > 2262) {
			return nil, "", fmt.Errorf("%w: %s %v is outside 1970..2262", ErrInvalid, b.field, b.t)
		}
	}
	switch {
	case pageSize == 0:
		pageSize = DefaultPageSize
	case pageSize < 0 || pageSize > MaxPageSize:
		return nil, "", fmt.Errorf("%w: page_size %d is outside 1..%d", ErrInvalid, pageSize, MaxPageSize)
	}
	var after []byte
	if pageToken != "" {
		var err error
		if after, err = base64.RawURLEncoding.DecodeString(pageToken); err != nil {
			return nil, "", fmt.Errorf("%w: page_token %q does not decode: %v", ErrInvalid, pageToken, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	sc := newScan(f)
	if after != nil && !bytes.HasPrefix(after, sc.prefix) {
		return nil, "", fmt.Errorf("%w: page_token %q belongs to another filter", ErrInvalid, pageToken)
	}
	var (
		out  []*measurev1.Result
		last []byte
		more bool
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		res := tx.Bucket(bucketResults)
		c := tx.Bucket(sc.bucket).Cursor()
		k, _ := c.Seek(sc.start(after))
		if after != nil && bytes.Equal(k, after) {
			k, _ = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, sc.prefix); k, _ = c.Next() {
			rk := k[sc.skip:]
			dk, err := decodeResultKey(rk)
			if err != nil {
				return err
			}
			if sc.pastEnd(dk) {
				break
			}
			if !f.inTime(dk.start) {
				continue
			}
			v := res.Get(rk)
			if v == nil {
				continue // index entry without its result: skip, never fail a query
			}
			r := &measurev1.Result{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decode result %q: %w", rk, err)
			}
			if !f.match(r) {
				continue
			}
			if len(out) == pageSize {
				more = true
				break
			}
			out = append(out, r)
			last = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list results: %w", err)
	}
	if !more {
		return out, "", nil
	}
	return out, base64.RawURLEncoding.EncodeToString(last), nil
}

// scan is how ListResults walks the keys for a filter: which bucket, which
// key prefix, where to start and when to stop.
type scan struct {
	bucket []byte
	prefix []byte
	skip   int // bytes before the resultKey in the bucket's keys
	// pairTime is set when the prefix is one node pair in the results
	// bucket: keys are then in time order and the scan can seek and stop on
	// the time bounds.
	pairTime bool
	since    time.Time
	until    time.Time
}

func newScan(f Filter) scan {
	switch {
	case f.RunID != "":
		p := append([]byte(f.RunID), sep)
		return scan{bucket: bucketRunResults, prefix: p, skip: len(p)}
	case f.SrcNode != "" && f.DstNode != "":
		return scan{bucket: bucketResults, prefix: pairPrefix(nil, f.SrcNode, f.DstNode), pairTime: true, since: f.Since, until: f.Until}
	case f.SrcNode != "":
		return scan{bucket: bucketResults, prefix: append([]byte(f.SrcNode), sep)}
	default:
		return scan{bucket: bucketResults}
	}
}

// start is the first key to seek to: after the page token, or the prefix
// (with the since bound for a pair scan).
func (sc scan) start(after []byte) []byte {
	if after != nil {
		return after
	}
	if sc.pairTime && !sc.since.IsZero() {
		return append(bytes.Clone(sc.prefix), timeBytes(sc.since)...)
	}
	return sc.prefix
}

// pastEnd reports whether a pair scan has passed its until bound.
func (sc scan) pastEnd(dk decodedKey) bool {
	return sc.pairTime && !sc.until.IsZero() && !dk.start.Before(sc.until)
}
