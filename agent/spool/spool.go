package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/boltfile"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/statedir"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// FileName is the spool file's name in Config.Dir.
const FileName = "spool.db"

// DefaultMaxResults is the bound of a spool whose Config.MaxResults is zero.
const DefaultMaxResults = 10000

// DefaultMaxResultBytes bounds the encoded results a spool holds,
// whatever their count, when Config.MaxResultBytes is zero: 64 MiB, many
// times what 10,000 results of the real tools take. When full, Put drops
// the oldest; a result larger than the bound alone is refused. The spool
// lives in /var/run, memory on most nodes.
const DefaultMaxResultBytes = 64 << 20

// maxWorkIDLength bounds the work IDs the spool indexes (bbolt keys are at
// most 32 KiB); the coordinator's are a few dozen bytes.
const maxWorkIDLength = 4096

// Errors of the spool. Match them with errors.Is.
var (
	// ErrLocked: another process (an agent with the same state directory)
	// holds the spool file.
	ErrLocked = errors.New("spool file is locked by another process")
	// ErrClosed: the spool was closed.
	ErrClosed = errors.New("spool is closed")
	// errCorrupt: bbolt cannot read the file.
	errCorrupt = errors.New("spool file is damaged")
)

// Buckets of the spool file.
var (
	// bucketResults maps seq (8 bytes, big-endian: key order is put order)
	// -> agentv1.WorkResult (protobuf).
	bucketResults = []byte("results")
	// bucketByWork maps workID 0x00 seq -> nothing: the entries of a work
	// ID. Rebuilt from bucketResults at every Open (its name on disk is
	// that of the first spools, which keyed results by test_id).
	bucketByWork = []byte("by_test")
	// bucketMeta holds keyDropped, keyReportsDropped and
	// keyReportsSeqEpoch.
	bucketMeta = []byte("meta")
	// keyDropped is how many results were ever dropped, uint64 big-endian.
	keyDropped = []byte("dropped")
	// bucketReports maps a ProbeReport's seq (8 bytes, big-endian) ->
	// agentv1.ProbeReport (protobuf); its NextSequence numbers the reports
	// across the agent's restarts (reports.go).
	bucketReports = []byte("reports")
	// keyReportsDropped is how many reports were ever dropped, uint64
	// big-endian, in bucketMeta.
	keyReportsDropped = []byte("reports_dropped")
	// keyReportsSeqEpoch is the spool's seq epoch (Spool.SeqEpoch),
	// uint64 big-endian, in bucketMeta.
	keyReportsSeqEpoch = []byte("reports_seq_epoch")
)

// Config configures Open.
type Config struct {
	// Dir is the directory of the spool file (FileName), created with mode
	// 0700 if missing. Empty means memory only: the results the
	// coordinator has not acknowledged are lost when the agent exits.
	Dir string
	// MaxResults bounds how many results the spool holds; zero means
	// DefaultMaxResults. When it is full, Put drops the oldest; a file
	// that holds more (a lower bound than before) drops its oldest at
	// Open.
	MaxResults int
	// MaxResultBytes bounds the encoded bytes of the results the spool
	// holds; zero means DefaultMaxResultBytes. When it is full, Put drops
	// the oldest; a file that holds more drops its oldest at Open.
	MaxResultBytes int
	// MaxReports bounds how many probe reports the spool holds; zero means
	// DefaultMaxReports. When it is full, PutReport drops the oldest; a
	// file that holds more drops its oldest at Open.
	MaxReports int
	// LockTimeout is how long Open waits for the lock another process
	// holds on the file; zero means 1 s.
	LockTimeout time.Duration
	// Logger receives drops and damage; nil means discard.
	Logger *slog.Logger
}

// Spool holds WorkResults until they are acknowledged. Its methods are
// safe for concurrent use.
type Spool struct {
	log  *slog.Logger
	path string // "" in memory

	mu      sync.Mutex
	db      *bolt.DB // nil in memory
	results lane     // agentv1.WorkResult, indexed by work ID (bucketByWork)
	reports lane     // agentv1.ProbeReport
	memSeq  uint64   // last report seq given, in memory
	// seqEpoch is the epoch of the report seqs (SeqEpoch), set by Open.
	seqEpoch uint64
	closed   bool
}

// lane is one bounded FIFO of the spool (the results, the probe reports):
// where its entries live, its bound and its counts, guarded by Spool.mu.
type lane struct {
	what       string     // "result" or "probe report", in errors and logs
	bucket     []byte     // its entries in a file spool, by seq
	droppedKey []byte     // its drop counter in bucketMeta
	max        int        // bound of n
	n          int        // entries held
	maxBytes   int        // bound of bytes; 0: none
	bytes      int        // encoded bytes of the entries held
	dropped    uint64     // entries dropped (full, or not decoding), over the file's life
	mem        []memEntry // in memory, oldest first
	// unindex removes, in a file spool, what else refers to a dropped
	// entry (key k, value v); nil when nothing does.
	unindex func(tx *bolt.Tx, k, v []byte) error
	// describe gives the log attributes naming a dropped entry's value.
	describe func(v []byte) []any
}

// memEntry is one entry of an in-memory spool: its encoded message and,
// for a result, its work ID.
type memEntry struct {
	workID string
	data   []byte
}

// Open opens or creates the spool in cfg.Dir, or an in-memory one. Entries
// that do not decode are dropped and counted; a file bbolt cannot read is
// moved aside and replaced by an empty one. The error wraps ErrLocked when
// another process holds the file.
func Open(cfg Config) (*Spool, error) {
	if cfg.MaxResultBytes < 0 {
		return nil, fmt.Errorf("spool: MaxResultBytes %d is negative", cfg.MaxResultBytes)
	}
	if cfg.MaxResults < 0 {
		return nil, fmt.Errorf("spool: MaxResults %d is negative", cfg.MaxResults)
	}
	if cfg.MaxReports < 0 {
		return nil, fmt.Errorf("spool: MaxReports %d is negative", cfg.MaxReports)
	}
	s := &Spool{log: cfg.Logger, results: resultsLane(cfg.MaxResults, cfg.MaxResultBytes), reports: reportsLane(cfg.MaxReports)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		s.seqEpoch = newSeqEpoch()
		return s, nil
	}
	timeout := cfg.LockTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	if err := statedir.Ensure(cfg.Dir); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.path = filepath.Join(cfg.Dir, FileName)
	if err := statedir.CheckFile(s.path); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	err := s.load(timeout)
	if errors.Is(err, errCorrupt) {
		aside := s.path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000")
		if rerr := os.Rename(s.path, aside); rerr != nil {
			return nil, fmt.Errorf("%w; moving it aside: %w", err, rerr)
		}
		s.log.Error("result spool damaged: moved aside, starting an empty one; the results it held are lost",
			"path", s.path, "moved_to", aside, "err", err)
		err = s.load(timeout)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// load opens the file, drops the entries that do not decode, rebuilds the
// work ID index and counts the entries. A damaged file, and a panic of
// bbolt on one, give an error wrapping errCorrupt (boltfile).
func (s *Spool) load(timeout time.Duration) error {
	db, err := boltfile.Open(s.path, &bolt.Options{Timeout: timeout}, errCorrupt)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open %s: %w (waited %v; another agent with the same state directory?)", s.path, ErrLocked, timeout)
	case err != nil:
		return fmt.Errorf("open %s: %w", s.path, err)
	}
	var n, bad, size int
	var dropped uint64
	err = boltfile.Guard(errCorrupt, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			n, bad, dropped, size = 0, 0, 0, 0
			res, err := tx.CreateBucketIfNotExists(bucketResults)
			if err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			if err := s.loadReports(tx); err != nil {
				return err
			}
			if tx.Bucket(bucketByWork) != nil {
				if err := tx.DeleteBucket(bucketByWork); err != nil {
					return err
				}
			}
			byWork, err := tx.CreateBucket(bucketByWork)
			if err != nil {
				return err
			}
			var badKeys [][]byte
			c := res.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				r := &agentv1.WorkResult{}
				if len(k) != 8 || proto.Unmarshal(v, r) != nil || len(protocol.ResultWorkID(r)) > maxWorkIDLength {
					badKeys = append(badKeys, bytes.Clone(k))
					continue
				}
				if err := byWork.Put(workKey(protocol.ResultWorkID(r), k), nil); err != nil {
					return err
				}
				n++
				size += len(v)
			}
			for _, k := range badKeys {
				if err := res.Delete(k); err != nil {
					return err
				}
			}
			bad = len(badKeys)
			if v := meta.Get(keyDropped); len(v) == 8 {
				dropped = binary.BigEndian.Uint64(v)
			}
			if bad > 0 {
				dropped += uint64(bad)
				return putUint64(meta, keyDropped, dropped)
			}
			return nil
		})
	})
	if err != nil {
		closeQuietly(db)
		return fmt.Errorf("load %s: %w", s.path, err)
	}
	if bad > 0 {
		s.log.Error("result spool held entries that do not decode; dropped", "path", s.path, "count", bad, "dropped_total", dropped)
	}
	s.db, s.results.n, s.results.dropped, s.results.bytes = db, n, dropped, size
	// A spool bounded lower than before drops its oldest now.
	for _, l := range []*lane{&s.results, &s.reports} {
		for l.n > l.max || l.maxBytes > 0 && l.bytes > l.maxBytes {
			if err := boltfile.Guard(errCorrupt, func() error { return s.dropOldest(l) }); err != nil {
				closeQuietly(db)
				s.db = nil
				return err
			}
		}
	}
	return nil
}

// resultsLane is the results' lane of at most bound entries (0:
// DefaultMaxResults) and maxBytes bytes (0: DefaultMaxResultBytes).
func resultsLane(bound, maxBytes int) lane {
	if bound == 0 {
		bound = DefaultMaxResults
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxResultBytes
	}
	return lane{what: "result", bucket: bucketResults, droppedKey: keyDropped, max: bound, maxBytes: maxBytes,
		unindex: func(tx *bolt.Tx, k, v []byte) error {
			r := &agentv1.WorkResult{}
			_ = proto.Unmarshal(v, r) // decoded at Open
			return tx.Bucket(bucketByWork).Delete(workKey(protocol.ResultWorkID(r), k))
		},
		describe: func(v []byte) []any {
			r := &agentv1.WorkResult{}
			_ = proto.Unmarshal(v, r) // Put encoded it or Open decoded it
			return []any{"work_id", protocol.ResultWorkID(r), "max_results", bound}
		}}
}

// putUint64 stores n (a count, an epoch) under key in the meta bucket,
// big-endian.
func putUint64(meta *bolt.Bucket, key []byte, n uint64) error {
	return meta.Put(key, binary.BigEndian.AppendUint64(nil, n))
}

func closeQuietly(db *bolt.DB) { boltfile.CloseQuietly(db) }

// workKey is workID 0x00 seq.
func workKey(workID string, seq []byte) []byte {
	k := make([]byte, 0, len(workID)+1+len(seq))
	k = append(k, workID...)
	k = append(k, 0)
	return append(k, seq...)
}

// Path returns the spool file's path; "" for an in-memory spool.
func (s *Spool) Path() string { return s.path }

// Len returns how many results the spool holds.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results.n
}

// Dropped returns how many results were dropped because the spool was
// full (or did not decode), over the life of its file.
func (s *Spool) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results.dropped
}

// Put adds r under its work ID (protocol.ResultWorkID), dropping the
// oldest result first if the spool is full; it returns once r is on disk
// (for a file spool). r is copied.
func (s *Spool) Put(r *agentv1.WorkResult) error {
	id := protocol.ResultWorkID(r)
	if len(id) > maxWorkIDLength {
		return fmt.Errorf("spool: work ID of %d bytes, at most %d", len(id), maxWorkIDLength)
	}
	v, err := proto.Marshal(r)
	if err != nil {
		return fmt.Errorf("spool: encode result %q: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.makeRoom(&s.results, len(v)); err != nil {
		return err
	}
	if s.db == nil {
		s.results.mem = append(s.results.mem, memEntry{workID: id, data: v})
		s.results.n++
		s.results.bytes += len(v)
		return nil
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		res := tx.Bucket(bucketResults)
		seq, err := res.NextSequence()
		if err != nil {
			return err
		}
		k := binary.BigEndian.AppendUint64(nil, seq)
		if err := res.Put(k, v); err != nil {
			return err
		}
		return tx.Bucket(bucketByWork).Put(workKey(id, k), nil)
	})
	if err != nil {
		return fmt.Errorf("spool: put %q: %w", id, err)
	}
	s.results.n++
	s.results.bytes += len(v)
	return nil
}

// makeRoom drops the oldest entries of l until it has room for one more
// of size bytes; one larger than l.maxBytes alone is refused. Caller
// holds s.mu.
func (s *Spool) makeRoom(l *lane, size int) error {
	if l.maxBytes > 0 && size > l.maxBytes {
		return fmt.Errorf("spool: a %s of %d bytes, more than the spool holds (%d)", l.what, size, l.maxBytes)
	}
	for l.n >= l.max || l.maxBytes > 0 && l.n > 0 && l.bytes+size > l.maxBytes {
		if err := s.dropOldest(l); err != nil {
			return err
		}
	}
	return nil
}

// dropOldest drops the oldest entry of l, counts it (in the file too, in
// the same transaction) and logs it. Caller holds s.mu (or, in load,
// has the spool to itself).
func (s *Spool) dropOldest(l *lane) error {
	var v []byte
	if s.db == nil {
		v = l.mem[0].data
		l.mem[0] = memEntry{}
		l.mem = l.mem[1:]
	} else {
		err := s.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(l.bucket)
			k, val := b.Cursor().First()
			if k == nil {
				return fmt.Errorf("no %s to drop", l.what)
			}
			k, v = bytes.Clone(k), bytes.Clone(val)
			if err := b.Delete(k); err != nil {
				return err
			}
			if l.unindex != nil {
				if err := l.unindex(tx, k, v); err != nil {
					return err
				}
			}
			return putUint64(tx.Bucket(bucketMeta), l.droppedKey, l.dropped+1)
		})
		if err != nil {
			return fmt.Errorf("spool: drop the oldest %s: %w", l.what, err)
		}
	}
	l.dropped++
	l.n--
	l.bytes -= len(v)
	s.log.Warn(l.what+" spool full: dropped the oldest "+l.what+" the coordinator has not acknowledged",
		append(l.describe(v), "dropped_total", l.dropped)...)
	return nil
}

// Ack removes every result held under each of workIDs and returns how many
// it removed; an unknown work ID is no error.
func (s *Spool) Ack(workIDs ...string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(&s.results, func(e memEntry) bool { return slices.Contains(workIDs, e.workID) },
		func(tx *bolt.Tx) [][]byte {
			byWork := tx.Bucket(bucketByWork)
			var keys [][]byte
			for _, id := range workIDs {
				prefix := workKey(id, nil)
				c := byWork.Cursor()
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
					if len(k) == len(prefix)+8 { // not a longer work ID that starts with id 0x00
						keys = append(keys, bytes.Clone(k[len(prefix):]))
					}
				}
			}
			return keys
		})
}

// remove removes from l the entries an ack names and returns how many it
// removed: in memory those gone says, in a file the keys keys lists that
// exist (with what refers to them: l.unindex), in one transaction.
// Caller holds s.mu.
func (s *Spool) remove(l *lane, gone func(memEntry) bool, keys func(tx *bolt.Tx) [][]byte) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if s.db == nil {
		before := len(l.mem)
		l.mem = slices.DeleteFunc(l.mem, gone)
		l.n, l.bytes = len(l.mem), 0
		for _, e := range l.mem {
			l.bytes += len(e.data)
		}
		return before - len(l.mem), nil
	}
	removed, size := 0, 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		removed, size = 0, 0
		b := tx.Bucket(l.bucket)
		for _, k := range keys(tx) {
			v := b.Get(k)
			if v == nil {
				continue
			}
			v = bytes.Clone(v)
			if err := b.Delete(k); err != nil {
				return err
			}
			if l.unindex != nil {
				if err := l.unindex(tx, k, v); err != nil {
					return err
				}
			}
			removed++
			size += len(v)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("spool: ack %ss: %w", l.what, err)
	}
	l.n -= removed
	l.bytes -= size
	return removed, nil
}

// Pending returns every result the spool holds, oldest first.
func (s *Spool) Pending() ([]*agentv1.WorkResult, error) {
	return pending(s, &s.results, func() *agentv1.WorkResult { return &agentv1.WorkResult{} })
}

// pending decodes every entry of the lane l, oldest first: l.mem when the
// spool is in memory, else l.bucket, under s.mu. Put encoded each and
// Open checked it, so one that does not decode means the disk changed
// under the spool: it is logged and skipped. After Close it returns
// ErrClosed.
func pending[M proto.Message](s *Spool, l *lane, newMsg func() M) ([]M, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []M
	decode := func(v []byte) {
		m := newMsg()
		if err := proto.Unmarshal(v, m); err != nil {
			s.log.Error(l.what+" spool entry does not decode; skipped", "err", err)
			return
		}
		out = append(out, m)
	}
	if s.db == nil {
		for _, e := range l.mem {
			decode(e.data)
		}
		return out, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(l.bucket).ForEach(func(_, v []byte) error {
			decode(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("spool: read %ss: %w", l.what, err)
	}
	return out, nil
}

// Close closes the file; the spool refuses every call after it.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.results.mem, s.reports.mem = nil, nil
	if s.db == nil {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("spool: close: %w", err)
	}
	return nil
}
