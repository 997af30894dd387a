// Package store owns the coordinator's only persistent state: a bbolt file
// with every result, every run and the last registration of every agent. It
// is the coordinator's only package that imports bbolt (agent/spool is the
// agent's). Results are keyed by node pair and start time (see schema.go),
// so the history of one pair over a time range is one cursor scan;
// concurrent writers are coalesced into batched transactions by bbolt's
// Batch, and a run's results come in group commits of their own
// (RecordResults: many tests and the run's header in one transaction).
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/internal/boltfile"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// ErrNotFound means the requested run does not exist.
var ErrNotFound = errors.New("not found")

// ErrCorrupt means the file is not a readable bbolt file (truncated,
// overwritten, or not a store at all); move it aside to start afresh.
var ErrCorrupt = errors.New("store file is damaged")

// ErrLocked means another process has the file open.
var ErrLocked = errors.New("store is locked")

// ErrInvalid means a caller's argument was refused; the message names it.
var ErrInvalid = errors.New("invalid argument")

// ErrLimit means that an answer would be larger than the caller's
// bound.
var ErrLimit = errors.New("over the limit")

// Config configures Open.
type Config struct {
	// Path is the bbolt file; created with mode 0600 if missing.
	Path string
	// LockTimeout is how long Open waits for the file lock held by another
	// process; zero means 2 s.
	LockTimeout time.Duration
	// Logger receives store events; nil means discard.
	Logger *slog.Logger
	// MaxScanKeys bounds the keys one page of ListResults or ListRollups
	// reads; zero means DefaultMaxScanKeys. A page whose filter matches
	// little ends there, short or empty, with a next page token that
	// resumes after the last key read.
	MaxScanKeys int
}

// DefaultMaxScanKeys is Config.MaxScanKeys's default: 65,536 keys, about
// 170 ms of a results listing that decodes every run ID (the origin
// filter, at BenchmarkListResultsOrigin's 2.6 µs a key), so that no listing holds a read transaction for long. bbolt's
// writer waits for the read transactions to end when it grows the file,
// and every reader after it waits too: a listing that scanned a week of
// a mesh's results in one transaction would stall the ingest that long.
const DefaultMaxScanKeys = 1 << 16

// Store is an open bbolt file. Its methods are safe for concurrent use.
type Store struct {
	db  *bolt.DB
	log *slog.Logger
	// nodes caches the interned node names of the series (series.go).
	nodes nodeCache
	// maxScan is Config.MaxScanKeys, the default in place of 0.
	maxScan int
	// rollupBatch overrides seriesRollupBatch when above 0, and
	// rollupFault, if set, is called at the end of each RollUpSeries
	// transaction with the batch's number: an error rolls it back. Both
	// are for tests (crashes between and within batches).
	rollupBatch int
	rollupFault func(batch int) error
}

// Open opens or creates the file and its buckets. It fails if another
// process holds the file (after LockTimeout) or the file is not a bbolt file.
func Open(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, fmt.Errorf("%w: store path is empty", ErrInvalid)
	}
	timeout := cfg.LockTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
		return nil, fmt.Errorf("store directory: %w", err)
	}
	db, err := boltfile.Open(cfg.Path, boltOptions(timeout), ErrCorrupt)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w: another process (a second coordinator?) holds its lock; waited %v",
			cfg.Path, ErrLocked, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	if err := os.Chmod(cfg.Path, 0o600); err != nil {
		boltfile.CloseQuietly(db)
		return nil, fmt.Errorf("chmod store %s: %w", cfg.Path, err)
	}
	indexed := 0
	err = boltfile.Guard(ErrCorrupt, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			newIndex := tx.Bucket(bucketTestResults) == nil
			for _, b := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return fmt.Errorf("create bucket %s: %w", b, err)
				}
			}
			if !newIndex {
				return nil
			}
			var err error
			indexed, err = buildTestIndex(tx)
			return err
		})
	})
	if err != nil {
		boltfile.CloseQuietly(db)
		return nil, fmt.Errorf("init store %s: %w", cfg.Path, err)
	}
	if indexed > 0 {
		log.Info("store: indexed the stored results by run, test and sample", "results", indexed)
	}
	log.Info("store opened", "path", cfg.Path)
	maxScan := cfg.MaxScanKeys
	if maxScan <= 0 {
		maxScan = DefaultMaxScanKeys
	}
	return &Store{db: db, log: log, maxScan: maxScan}, nil
}

// boltOptions are the store's bbolt options, as etcd sets them for the
// same reasons: the map a file is read through starts at initialMmapBytes
// (address space, not memory), so that a growing file is not remapped,
// every reader waiting and every page copied, at each doubling; free
// pages are tracked in a hash map. The free list is still written at
// each commit: rebuilding it at open walks the file in a goroutine of
// bbolt's own, where a damaged file's fault cannot be caught.
func boltOptions(timeout time.Duration) *bolt.Options {
	return &bolt.Options{Timeout: timeout, InitialMmapSize: initialMmapBytes, FreelistType: bolt.FreelistMapType}
}

// initialMmapBytes is the size of the store's first map of its file: 1 GiB.
const initialMmapBytes = 1 << 30

// Close flushes pending batches and closes the file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.db.Path() }

// CreateRun writes a new run: its header and, once and for all, its
// planned tests.
func (s *Store) CreateRun(ctx context.Context, run *measurev1.Run) error {
	hdr, err := encodeRunHeader(run)
	if err != nil {
		return err
	}
	planned, err := proto.Marshal(&measurev1.Run{Planned: run.GetPlanned()})
	if err != nil {
		return fmt.Errorf("encode planned tests of run %s: %w", run.GetRunId(), err)
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketRunPlanned).Put([]byte(run.GetRunId()), planned); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(run.GetRunId()), hdr)
	})
}

// PutRun updates a run's header (state, counters, times); run.Planned is
// ignored: the planned tests were written by CreateRun. This keeps each
// progress update small whatever the size of the run.
func (s *Store) PutRun(ctx context.Context, run *measurev1.Run) error {
	v, err := encodeRunHeader(run)
	if err != nil {
		return err
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).Put([]byte(run.GetRunId()), v)
	})
}

// encodeRunHeader checks run's ID and encodes its header
// (testspec.RunHeader: no planned tests), the value of bucketRuns.
func encodeRunHeader(run *measurev1.Run) ([]byte, error) {
	if err := validID("run_id", run.GetRunId()); err != nil {
		return nil, err
	}
	v, err := proto.Marshal(testspec.RunHeader(run))
	if err != nil {
		return nil, fmt.Errorf("encode run %s: %w", run.GetRunId(), err)
	}
	return v, nil
}

// GetRun reads a run with its planned tests; the error wraps ErrNotFound
// if it does not exist.
func (s *Store) GetRun(ctx context.Context, runID string) (*measurev1.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	run, planned := &measurev1.Run{}, &measurev1.Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRuns).Get([]byte(runID))
		if v == nil {
			return fmt.Errorf("run %q: %w", runID, ErrNotFound)
		}
		if err := proto.Unmarshal(v, run); err != nil {
			return fmt.Errorf("decode run %s: %w", runID, err)
		}
		if p := tx.Bucket(bucketRunPlanned).Get([]byte(runID)); p != nil {
			if err := proto.Unmarshal(p, planned); err != nil {
				return fmt.Errorf("decode planned tests of run %s: %w", runID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	run.Planned = planned.GetPlanned()
	return run, nil
}

// Runs returns the headers (no planned tests) of every run whose state is
// one of states (all runs if none is given), oldest first.
func (s *Store) Runs(ctx context.Context, states ...measurev1.RunState) ([]*measurev1.Run, error) {
	return decodeBucket(ctx, s.db, bucketRuns, "run", func(run *measurev1.Run) bool {
		return len(states) == 0 || slices.Contains(states, run.GetState())
	})
}

// decodeBucket returns, in key order, the records of a bucket of
// protobuf values decoded as M's that keep accepts (nil keeps all); what
// names a record in the error of one that does not decode.
func decodeBucket[T any, M interface {
	*T
	proto.Message
}](ctx context.Context, db *bolt.DB, bucket []byte, what string, keep func(M) bool) ([]M, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []M
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			m := M(new(T))
			if err := proto.Unmarshal(v, m); err != nil {
				return fmt.Errorf("decode %s %s: %w", what, k, err)
			}
			if keep == nil || keep(m) {
				out = append(out, m)
			}
			return nil
		})
	})
	return out, err
}

// PutAgent records the last known registration of a node.
func (s *Store) PutAgent(ctx context.Context, a *storev1.Agent) error {
	if err := validID("node_name", a.GetNodeName()); err != nil {
		return err
	}
	v, err := proto.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode agent %s: %w", a.GetNodeName(), err)
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAgents).Put([]byte(a.GetNodeName()), v)
	})
}

// DeleteAgent forgets a node's recorded registration; a node never
// recorded is no error.
func (s *Store) DeleteAgent(ctx context.Context, node string) error {
	if err := validID("node_name", node); err != nil {
		return err
	}
	return s.batch(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAgents).Delete([]byte(node))
	})
}

// Agents returns every recorded agent, sorted by node name.
func (s *Store) Agents(ctx context.Context) ([]*storev1.Agent, error) {
	return decodeBucket[storev1.Agent](ctx, s.db, bucketAgents, "agent", nil)
}

// batch runs fn in a write transaction that bbolt may share with other
// concurrent callers (one fsync for many writes). fn may run more than once,
// so it must only write.
func (s *Store) batch(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.Batch(fn); err != nil {
		return fmt.Errorf("store write: %w", err)
	}
	return nil
}

// validID checks that an ID is usable in a key (series.CheckKey); the
// error wraps ErrInvalid.
func validID(field, id string) error {
	if err := series.CheckKey(field, id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
