package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// DefaultPageSize and MaxPageSize bound ListResults pages (results),
// MaxPageBytes their size.
const (
	DefaultPageSize = 1000
	MaxPageSize     = 10000
	// MaxPageBytes bounds the encoded results of one ListResults page
	// (one result is returned whatever its size): a page stays well under
	// gRPC's default 4 MiB limit of a message whatever page_size asks for;
	// a shorter page has a next page token.
	MaxPageBytes = 2 << 20
)

// scanCheckEvery is how many keys a listing's scan reads between two
// looks at its context: a query whose filter matches little reads many
// keys for one page, and a caller that gave up (its deadline, or a
// client gone) ends the read transaction within that many.
const scanCheckEvery = 1024

// AddResults writes results in one batched transaction. Each needs
// test_id, run_id, src_node, dst_node and start_time. Each sample of a
// test (run ID, test ID, index) is stored once: a result for a sample that
// is stored already only replaces a STATUS_INTERRUPTED placeholder (and
// only with a result that is no placeholder); otherwise it is dropped, so
// that a resend is harmless and the first real result stays. Run counters
// are not touched (see ReplaceInterrupted). Nothing is written if any
// result is refused (ErrInvalid).
func (s *Store) AddResults(ctx context.Context, results []*measurev1.Result) error {
	rows, err := encodeResults(results)
	if err != nil {
		return err
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		rt := openResultTx(tx)
		for _, row := range rows {
			if err := rt.put(row); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordResults writes results as AddResults does and, in the same
// transaction, run's header as PutRun does (run.Planned is ignored): the
// group commit of a run's ended tests, whose header then never counts a
// test whose results are not stored, nor lags them. It is one bbolt
// transaction of its own, committed (fdatasync) before it returns, with
// no batching delay: the caller groups the tests. The dispatch record
// (PutDispatched) of each test with a result that is no
// STATUS_INTERRUPTED placeholder is deleted in the same transaction: no
// late answer can change such a test. Nothing is written if any result
// is refused (ErrInvalid).
func (s *Store) RecordResults(ctx context.Context, run *measurev1.Run, results []*measurev1.Result) error {
	if err := validID("run_id", run.GetRunId()); err != nil {
		return err
	}
	hdr, err := proto.Marshal(testspec.RunHeader(run))
	if err != nil {
		return fmt.Errorf("encode run %s: %w", run.GetRunId(), err)
	}
	rows, err := encodeResults(results)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		rt := openResultTx(tx)
		dispatched := tx.Bucket(bucketDispatched)
		for _, row := range rows {
			if err := rt.put(row); err != nil {
				return err
			}
			if row.r.GetStatus() != measurev1.Status_STATUS_INTERRUPTED {
				if err := dispatched.Delete([]byte(row.r.GetRunId() + "/" + row.r.GetTestId())); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketRuns).Put([]byte(run.GetRunId()), hdr)
	})
	if err != nil {
		return fmt.Errorf("store write: %w", err)
	}
	return nil
}

// ReplaceInterrupted stores results that came late, test by test: each
// element of tests holds the results of one test (one run ID and test ID).
// In one transaction, a test whose stored results are all STATUS_INTERRUPTED
// placeholders gets them replaced by its new results, and if none of those
// failed, its run's tests_failed goes down by one (the placeholder counted
// as a failed test). A test with no stored result, or with any that is no
// placeholder, is left alone: replaced[i] reports which tests were written.
// Nothing is written if any result is refused (ErrInvalid).
func (s *Store) ReplaceInterrupted(ctx context.Context, tests [][]*measurev1.Result) (replaced []bool, err error) {
	rows := make([][]resultRow, len(tests))
	for i, rs := range tests {
		if len(rs) == 0 {
			return nil, fmt.Errorf("%w: tests[%d] has no result", ErrInvalid, i)
		}
		for _, r := range rs[1:] {
			if r.GetRunId() != rs[0].GetRunId() || r.GetTestId() != rs[0].GetTestId() {
				return nil, fmt.Errorf("%w: tests[%d] mixes tests %s/%s and %s/%s", ErrInvalid, i,
					rs[0].GetRunId(), rs[0].GetTestId(), r.GetRunId(), r.GetTestId())
			}
		}
		if rows[i], err = encodeResults(rs); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		replaced = make([]bool, len(tests))
		rt := openResultTx(tx)
		runs := map[string]*measurev1.Run{} // headers changed in this transaction
		for i, rs := range rows {
			runID, testID := rs[0].r.GetRunId(), rs[0].r.GetTestId()
			old, err := rt.placeholders(runID, testID)
			if err != nil || len(old) == 0 {
				if err != nil {
					return err
				}
				continue
			}
			for _, rk := range old {
				if err := rt.delete(runID, rk); err != nil {
					return err
				}
			}
			failed := false
			for _, row := range rs {
				if err := rt.insert(row); err != nil {
					return err
				}
				failed = failed || row.r.GetStatus() != measurev1.Status_STATUS_OK
			}
			replaced[i] = true
			if failed {
				continue
			}
			run, ok := runs[runID]
			if !ok {
				v := tx.Bucket(bucketRuns).Get([]byte(runID))
				if v == nil {
					continue // a run without header: nothing to count
				}
				run = &measurev1.Run{}
				if err := proto.Unmarshal(v, run); err != nil {
					return fmt.Errorf("decode run %s: %w", runID, err)
				}
				runs[runID] = run
			}
			if run.GetTestsFailed() > 0 {
				run.TestsFailed--
			}
		}
		for id, run := range runs {
			v, err := proto.Marshal(run)
			if err != nil {
				return fmt.Errorf("encode run %s: %w", id, err)
			}
			if err := tx.Bucket(bucketRuns).Put([]byte(id), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store late results: %w", err)
	}
	return replaced, nil
}

// resultRow is a result ready to be written: its key and its encoding.
type resultRow struct {
	r    *measurev1.Result
	k, v []byte
}

// encodeResults checks and encodes results; the error wraps ErrInvalid
// for a result that cannot be stored.
func encodeResults(results []*measurev1.Result) ([]resultRow, error) {
	rows := make([]resultRow, 0, len(results))
	for i, r := range results {
		for _, f := range []struct{ name, v string }{
			{"test_id", r.GetTestId()}, {"run_id", r.GetRunId()},
			{"src_node", r.GetSrcNode()}, {"dst_node", r.GetDstNode()},
		} {
			if err := validID(fmt.Sprintf("results[%d].%s", i, f.name), f.v); err != nil {
				return nil, err
			}
		}
		if err := validStart(r.GetStartTime()); err != nil {
			return nil, fmt.Errorf("%w: results[%d].start_time (test %s): %v", ErrInvalid, i, r.GetTestId(), err) //nolint:errorlint // the sentinel decides errors.Is; the cause is text only
		}
		v, err := proto.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode result %s: %w", r.GetTestId(), err)
		}
		k := resultKey(r.GetSrcNode(), r.GetDstNode(), r.GetStartTime().AsTime(), r.GetRunId(), r.GetTestId(), r.GetIndex())
		rows = append(rows, resultRow{r: r, k: k, v: v})
	}
	return rows, nil
}

// resultTx writes results and their two indexes in one transaction.
type resultTx struct {
	res, byRun, byTest *bolt.Bucket
}

func openResultTx(tx *bolt.Tx) resultTx {
	return resultTx{res: tx.Bucket(bucketResults), byRun: tx.Bucket(bucketRunResults), byTest: tx.Bucket(bucketTestResults)}
}

// put stores row unless its sample is stored already; a stored
// STATUS_INTERRUPTED placeholder gives way to a row that is none.
func (t resultTx) put(row resultRow) error {
	ik := testIndexKey(row.r.GetRunId(), row.r.GetTestId(), row.r.GetIndex())
	if old := t.byTest.Get(ik); old != nil {
		old = bytes.Clone(old)
		placeholder, found, err := t.isPlaceholder(old)
		if err != nil {
			return err
		}
		if found && (!placeholder || row.r.GetStatus() == measurev1.Status_STATUS_INTERRUPTED) {
			return nil // the first real result stays
		}
		if err := t.delete(row.r.GetRunId(), old); err != nil {
			return err
		}
	}
	return t.insert(row)
}

// insert writes row and its index entries.
func (t resultTx) insert(row resultRow) error {
	if err := t.res.Put(row.k, row.v); err != nil {
		return err
	}
	if err := t.byRun.Put(runResultKey(row.r.GetRunId(), row.k), nil); err != nil {
		return err
	}
	return t.byTest.Put(testIndexKey(row.r.GetRunId(), row.r.GetTestId(), row.r.GetIndex()), row.k)
}

// delete removes the result stored under rk and its index entries.
func (t resultTx) delete(runID string, rk []byte) error {
	ik, err := testIndexKeyOf(rk)
	if err != nil {
		return err
	}
	if err := t.res.Delete(rk); err != nil {
		return err
	}
	if err := t.byRun.Delete(runResultKey(runID, rk)); err != nil {
		return err
	}
	if cur := t.byTest.Get(ik); cur != nil && bytes.Equal(cur, rk) {
		return t.byTest.Delete(ik)
	}
	return nil
}

// isPlaceholder reports whether the result under rk is a
// STATUS_INTERRUPTED placeholder; found is false if there is none.
func (t resultTx) isPlaceholder(rk []byte) (placeholder, found bool, err error) {
	v := t.res.Get(rk)
	if v == nil {
		return false, false, nil
	}
	r := &measurev1.Result{}
	if err := proto.Unmarshal(v, r); err != nil {
		return false, true, fmt.Errorf("decode result %q: %w", rk, err)
	}
	return r.GetStatus() == measurev1.Status_STATUS_INTERRUPTED, true, nil
}

// placeholders returns the keys of a test's stored results if there are
// any and every one is a STATUS_INTERRUPTED placeholder, else nil.
func (t resultTx) placeholders(runID, testID string) ([][]byte, error) {
	prefix := testPrefix(runID, testID)
	var keys [][]byte
	c := t.byTest.Cursor()
	for k, rk := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, rk = c.Next() {
		if len(k) != len(prefix)+4 {
			continue
		}
		placeholder, found, err := t.isPlaceholder(rk)
		if err != nil {
			return nil, err
		}
		if found && !placeholder {
			return nil, nil
		}
		if found {
			keys = append(keys, bytes.Clone(rk))
		}
	}
	return keys, nil
}

// buildTestIndex fills bucketTestResults from bucketResults, for a store
// written before that index existed.
func buildTestIndex(tx *bolt.Tx) (int, error) {
	byTest := tx.Bucket(bucketTestResults)
	n := 0
	c := tx.Bucket(bucketResults).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		ik, err := testIndexKeyOf(k)
		if err != nil {
			return n, err
		}
		if err := byTest.Put(ik, bytes.Clone(k)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
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
	ids := map[string]bool{}
	err := s.eachRunResult(ctx, runID, func(_ *bolt.Tx, key []byte) error {
		dk, err := decodeResultKey(key)
		if err != nil {
			return err
		}
		ids[dk.testID] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("run %s test IDs: %w", runID, err)
	}
	return ids, nil
}

// RunTests maps each test of a run that has stored results to whether
// any of them is not STATUS_OK.
func (s *Store) RunTests(ctx context.Context, runID string) (map[string]bool, error) {
	failed := map[string]bool{}
	err := s.eachRunResult(ctx, runID, func(tx *bolt.Tx, key []byte) error {
		v := tx.Bucket(bucketResults).Get(key)
		if v == nil {
			return nil // index entry without its result
		}
		r := &measurev1.Result{}
		if err := proto.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode result %q: %w", key, err)
		}
		failed[r.GetTestId()] = failed[r.GetTestId()] || r.GetStatus() != measurev1.Status_STATUS_OK
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("run %s tests: %w", runID, err)
	}
	return failed, nil
}

// eachRunResult calls fn, in one read transaction, with the resultKey of
// each result of runID that bucketRunResults indexes, in key order; fn's
// error stops it and is returned.
func (s *Store) eachRunResult(ctx context.Context, runID string, fn func(tx *bolt.Tx, key []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := append([]byte(runID), sep)
	return s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRunResults).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if err := fn(tx, k[len(prefix):]); err != nil {
				return err
			}
		}
		return nil
	})
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
	// IPFamily selects one family (a result without one is IPv4);
	// unspecified selects all. Only ListResults honours it.
	IPFamily measurev1.IPFamily
	// Origin selects the results of runs of one origin
	// (testspec.OriginOf of the stored run); unspecified selects all, and
	// is the only value that selects a result whose run is no longer
	// stored. Only ListResults honours it.
	Origin measurev1.RunOrigin
}

// RunResults returns every result of a run, in ListResults' order, page
// by page; none for an unknown run.
func (s *Store) RunResults(ctx context.Context, runID string) ([]*measurev1.Result, error) {
	var all []*measurev1.Result
	token := ""
	for {
		page, next, err := s.ListResults(ctx, Filter{RunID: runID}, MaxPageSize, token)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		token = next
	}
}

// ListResults returns up to pageSize results matching f (0 means
// DefaultPageSize; more than MaxPageSize is refused), ordered by source
// node, destination node and start time (by run, then that order, when
// f.RunID is set), and the token of the next page ("" on the last page).
// pageToken is "" or a token from an earlier call with the same filter
// (pageSize may differ); any other token wraps ErrInvalid, naming
// page_token. Results stored between two calls show on a later page if
// they sort after the last page's end. A page holds fewer results than
// pageSize, with a next page token, where more would exceed MaxPageBytes,
// or where its scan read Config.MaxScanKeys keys: a filter that matches
// little may give short or empty pages before the end, each a short read
// transaction.
func (s *Store) ListResults(ctx context.Context, f Filter, pageSize int, pageToken string) ([]*measurev1.Result, string, error) {
	pageSize, scope, after, err := f.page(listingResults, pageSize, DefaultPageSize, MaxPageSize, pageToken)
	if err != nil {
		return nil, "", err
	}
	sc := newScan(f)
	if after != nil {
		if !bytes.HasPrefix(after, sc.prefix) {
			return nil, "", fmt.Errorf("%w: page_token holds a key outside the filter's range", ErrInvalid)
		}
		if _, err := decodeResultKey(after[sc.skip:]); err != nil { // sc.skip <= len(sc.prefix)
			return nil, "", fmt.Errorf("%w: page_token holds no result key", ErrInvalid)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var (
		out  []*measurev1.Result
		last []byte
		more bool
		size int // encoded bytes of out
	)
	origins := runOrigins{}
	err = s.db.View(func(tx *bolt.Tx) error {
		res := tx.Bucket(bucketResults)
		c := tx.Bucket(sc.bucket).Cursor()
		k, _ := c.Seek(sc.start(after))
		if after != nil && bytes.Equal(k, after) {
			k, _ = c.Next()
		}
		var prev []byte // the key read before k: valid for the transaction
		next := func() { prev = k; k, _ = c.Next() }
		for n := 0; k != nil && bytes.HasPrefix(k, sc.prefix); next() {
			if n++; n%scanCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err() // the caller gave up: end the read transaction
			}
			if n > s.maxScan {
				more, last = true, bytes.Clone(prev) // the next page reads on after prev
				break
			}
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
			if f.Origin != measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED {
				// Before the decode: a listing of the clients' runs skips
				// the monitor's many results at the cost of their run ID.
				o, err := origins.ofResult(tx, v)
				if err != nil {
					return fmt.Errorf("decode result %q: %w", rk, err)
				}
				if o != f.Origin {
					continue
				}
			}
			r := &measurev1.Result{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decode result %q: %w", rk, err)
			}
			if !f.match(r) {
				continue
			}
			if len(out) == pageSize || (len(out) > 0 && size+len(v) > MaxPageBytes) {
				more = true
				break
			}
			out = append(out, r)
			size += len(v)
			last = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list results: %w", err)
	}
	return out, nextPageToken(more, listingResults, scope, last), nil
}
