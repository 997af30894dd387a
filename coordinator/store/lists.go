package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/series"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Page bounds of ListRuns, ListRollups and ListSeries (ListResults':
// DefaultPageSize and MaxPageSize). A zero page size means the default;
// above the maximum is refused.
const (
	// DefaultRunsPageSize and MaxRunsPageSize bound ListRuns pages (runs).
	DefaultRunsPageSize = 20
	// MaxRunsPageSize: see DefaultRunsPageSize.
	MaxRunsPageSize = 1000
	// DefaultRollupsPageSize and MaxRollupsPageSize bound ListRollups
	// pages (rollups).
	DefaultRollupsPageSize = 10000
	// MaxRollupsPageSize: see DefaultRollupsPageSize.
	MaxRollupsPageSize = 100000
	// DefaultSeriesPageSize and MaxSeriesPageSize bound ListSeries pages
	// (samples): a day of 10 s periods is one default page, and a full
	// page of samples stays well under gRPC's 4 MiB message limit.
	DefaultSeriesPageSize = 10000
	// MaxSeriesPageSize: see DefaultSeriesPageSize.
	MaxSeriesPageSize = 20000
)

// DefaultSeriesRange and MaxSeriesRange bound ListSeries' time range: an
// unset since is DefaultSeriesRange before until; a longer range than
// MaxSeriesRange is refused.
const (
	DefaultSeriesRange = 24 * time.Hour
	// MaxSeriesRange: see DefaultSeriesRange.
	MaxSeriesRange = 31 * 24 * time.Hour
)

// NewestRunScan bounds the run headers NewestRun reads, newest first:
// 10,000 (a light schedule every 30 s makes 720 runs between two of a
// bandwidth schedule every 6 h).
const NewestRunScan = 10_000

// NewestRun returns the header (no planned tests) of the newest run
// labelled label, or nil if none is among the newest NewestRunScan runs.
func (s *Store) NewestRun(ctx context.Context, label string) (*measurev1.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var found *measurev1.Run
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		n := 0
		for k, v := c.Last(); k != nil && n < NewestRunScan; k, v = c.Prev() {
			n++
			run := &measurev1.Run{}
			if err := proto.Unmarshal(v, run); err != nil {
				return fmt.Errorf("decode run %s: %w", k, err)
			}
			if run.GetSpec().GetLabel() == label {
				found = run
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("newest run of %.64q: %w", label, err)
	}
	return found, nil
}

// ListRuns returns up to pageSize run headers (no planned tests), newest
// first (run IDs are ULIDs: key order is creation order), and the token of
// the next, older page ("" on the last page). pageToken is "" for the
// first page or a token an earlier ListRuns returned; any other wraps
// ErrInvalid, naming page_token. A page starts after the previous page's
// last run ID, so runs created between two calls never shift a page. A
// page holds fewer runs than pageSize, with a next page token, where more
// would exceed MaxPageBytes (a header keeps its run's spec, whose pairs
// may run to megabytes).
func (s *Store) ListRuns(ctx context.Context, pageSize int, pageToken string) ([]*measurev1.Run, string, error) {
	pageSize, err := resolvePageSize("page_size", pageSize, DefaultRunsPageSize, MaxRunsPageSize)
	if err != nil {
		return nil, "", err
	}
	scope := newScope(listingRuns).sum()
	after, err := decodePageToken(pageToken, listingRuns, scope)
	if err != nil {
		return nil, "", err
	}
	if after != nil {
		if err := validID("run_id", string(after)); err != nil {
			return nil, "", fmt.Errorf("%w: page_token holds no run ID", ErrInvalid)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var (
		runs []*measurev1.Run
		more bool
	)
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		k, v := c.Last()
		if after != nil {
			// The newest key before after: Seek finds the first at or after it.
			if k, _ = c.Seek(after); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		size := 0 // encoded bytes of runs
		for ; k != nil; k, v = c.Prev() {
			if len(runs) == pageSize || (len(runs) > 0 && size+len(v) > MaxPageBytes) {
				more = true
				break
			}
			run := &measurev1.Run{}
			if err := proto.Unmarshal(v, run); err != nil {
				return fmt.Errorf("decode run %s: %w", k, err)
			}
			runs, size = append(runs, run), size+len(v)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	if !more {
		return runs, "", nil
	}
	return runs, encodePageToken(listingRuns, scope, []byte(runs[len(runs)-1].GetRunId())), nil
}

// ListRollups returns up to pageSize (0: DefaultRollupsPageSize; above
// MaxRollupsPageSize is refused) of the rollups of f's node pair (or of
// every pair, or of one source) whose hour starts in [Since, Until), Path
// and Test filtering too, in (source, destination, hour) order, and the
// token of the next page ("" on the last page). pageToken is "" or a token
// from an earlier call with the same filter (pageSize may differ); any
// other wraps ErrInvalid, naming page_token. A page holds fewer rollups
// than pageSize, with a next page token, where more would exceed
// MaxPageBytes. f.RunID is not used.
func (s *Store) ListRollups(ctx context.Context, f Filter, pageSize int, pageToken string) ([]*measurev1.Rollup, string, error) {
	f.RunID = ""
	pageSize, scope, after, err := f.page(listingRollups, pageSize, DefaultRollupsPageSize, MaxRollupsPageSize, pageToken)
	if err != nil {
		return nil, "", err
	}
	var prefix []byte
	pair := f.SrcNode != "" && f.DstNode != ""
	switch {
	case pair:
		prefix = pairPrefix(nil, f.SrcNode, f.DstNode)
	case f.SrcNode != "":
		prefix = append([]byte(f.SrcNode), sep)
	}
	if after != nil {
		if !bytes.HasPrefix(after, prefix) {
			return nil, "", fmt.Errorf("%w: page_token holds a key outside the filter's range", ErrInvalid)
		}
		if parts := bytes.SplitN(after, []byte{sep}, 3); len(parts) != 3 || len(parts[2]) < 8+4+4 {
			return nil, "", fmt.Errorf("%w: page_token holds no rollup key", ErrInvalid)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	start := prefix
	if pair && !f.Since.IsZero() {
		start = append(bytes.Clone(prefix), timeBytes(f.Since)...)
	}
	if after != nil {
		start = after
	}
	var (
		out  []*measurev1.Rollup
		last []byte
		more bool
		size int
	)
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRollups).Cursor()
		k, v := c.Seek(start)
		if after != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
		var prev []byte // the key read before k: valid for the transaction
		next := func() { prev = k; k, v = c.Next() }
		for n := 0; k != nil && bytes.HasPrefix(k, prefix); next() {
			if n++; n%scanCheckEvery == 0 && ctx.Err() != nil {
				return ctx.Err() // the caller gave up: end the read transaction
			}
			if n > s.maxScan {
				more, last = true, bytes.Clone(prev) // the next page reads on after prev
				break
			}
			if pair && !f.Until.IsZero() && len(k) >= len(prefix)+8 &&
				int64(binary.BigEndian.Uint64(k[len(prefix):])) >= f.Until.UnixNano() {
				break // one pair's keys are in hour order
			}
			ru := &measurev1.Rollup{}
			if err := proto.Unmarshal(v, ru); err != nil {
				return fmt.Errorf("decode rollup %q: %w", k, err)
			}
			hour := ru.GetHourStart().AsTime()
			switch {
			case f.SrcNode != "" && ru.GetSrcNode() != f.SrcNode,
				f.DstNode != "" && ru.GetDstNode() != f.DstNode,
				f.Path != 0 && ru.GetPath() != f.Path,
				f.Test != 0 && ru.GetSpec().GetTest() != f.Test,
				!f.inTime(hour):
				continue
			}
			if len(out) == pageSize || (len(out) > 0 && size+len(v) > MaxPageBytes) {
				more = true
				break
			}
			out, last = append(out, ru), bytes.Clone(k)
			size += len(v)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list rollups: %w", err)
	}
	return out, nextPageToken(more, listingRollups, scope, last), nil
}

// SeriesPage is one page of ListSeries: the hourly rollup points of the
// range first (they hold the hours whose raw samples retention replaced,
// so they precede the samples), then the raw samples.
type SeriesPage struct {
	// Rollups are the points whose hour overlaps the range, in Start
	// order.
	Rollups []series.Rollup
	// Samples are the samples whose Start is in the range, in Start
	// order.
	Samples []series.Sample
}

// Len is the number of items on the page: rollups and samples.
func (p SeriesPage) Len() int { return len(p.Rollups) + len(p.Samples) }

// seriesTokenRollup marks a ListSeries page token that stopped in the
// rollups: the byte, then the last point's Start (8, Unix ns). A token
// of 8 bytes stopped in the samples: the last sample's Start.
const seriesTokenRollup = 'r'

// ListSeries returns up to pageSize items (0: DefaultSeriesPageSize;
// above MaxSeriesPageSize is refused) of series k over [since, until):
// the hourly rollup points whose hour overlaps it, then the samples
// whose Start is in it, in Start order as Series returns them, and the
// token of the next page ("" on the last page). since and until are the
// client's bounds, zero when unset: an unset until is now, an unset
// since is DefaultSeriesRange before until; a range that is empty or
// longer than MaxSeriesRange is refused. pageToken is "" or a token from
// an earlier call with the same k, since and until (unset alike: an
// unset bound is resolved again against now on every page); any other
// wraps ErrInvalid, naming page_token. A page holds the items after the
// previous page's last; a page that ends the rollups with room to spare
// goes on with the samples.
func (s *Store) ListSeries(ctx context.Context, k series.Key, since, until, now time.Time, pageSize int, pageToken string) (SeriesPage, string, error) {
	var page SeriesPage
	pageSize, err := resolvePageSize("page_size", pageSize, DefaultSeriesPageSize, MaxSeriesPageSize)
	if err != nil {
		return page, "", err
	}
	to, from := until, since
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = to.Add(-DefaultSeriesRange)
	}
	if !from.Before(to) || to.Sub(from) > MaxSeriesRange {
		return page, "", fmt.Errorf("%w: start_time %v to end_time %v: want a range of up to %v", ErrInvalid, from.UTC(), to.UTC(), MaxSeriesRange)
	}
	sb := newScope(listingSeries).str(k.Src).str(k.Dst).num(int64(k.Path)).num(int64(k.Kind))
	if k.V6() { // an IPv4 listing's tokens stay as they were
		sb = sb.num(6)
	}
	scope := sb.time(since).time(until).sum()
	after, err := decodePageToken(pageToken, listingSeries, scope)
	if err != nil {
		return page, "", err
	}
	inRollups := after == nil
	if after != nil {
		if len(after) == 9 && after[0] == seriesTokenRollup {
			inRollups, after = true, after[1:]
		} else if len(after) != 8 {
			return page, "", fmt.Errorf("%w: page_token holds no sample time", ErrInvalid)
		}
		if int64(binary.BigEndian.Uint64(after)) <= 0 {
			return page, "", fmt.Errorf("%w: page_token holds no sample time", ErrInvalid)
		}
	}
	if inRollups {
		rfrom := from
		if after != nil {
			// The hours after the last point returned.
			if next := time.Unix(0, int64(binary.BigEndian.Uint64(after))).Add(series.RollupBucket); next.After(rfrom) {
				rfrom = next
			}
		}
		if rfrom.Before(to) {
			if page.Rollups, err = s.readRollups(ctx, k, rfrom, to, pageSize+1); err != nil {
				return SeriesPage{}, "", err
			}
		}
		if n := len(page.Rollups); n >= pageSize {
			page.Rollups = page.Rollups[:pageSize]
			key := append([]byte{seriesTokenRollup}, binary.BigEndian.AppendUint64(nil, uint64(page.Rollups[pageSize-1].Start.UnixNano()))...)
			return page, encodePageToken(listingSeries, scope, key), nil
		}
	} else if next := time.Unix(0, int64(binary.BigEndian.Uint64(after))+1); next.After(from) {
		from = next
	}
	room := pageSize - len(page.Rollups)
	out, err := s.readSeries(ctx, k, from, to, room)
	if err != nil {
		return SeriesPage{}, "", err
	}
	if page.Samples = out; len(out) <= room {
		return page, "", nil
	}
	page.Samples = out[:room]
	key := binary.BigEndian.AppendUint64(nil, uint64(out[room-1].Start.UnixNano()))
	return page, encodePageToken(listingSeries, scope, key), nil
}
