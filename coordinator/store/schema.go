package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Buckets. Every bucket the coordinator uses is declared here, once.
var (
	// bucketResults maps resultKey -> measurev1.Result (protobuf).
	bucketResults = []byte("results")
	// bucketRunResults maps runID 0x00 resultKey -> nothing: the results of
	// one run, in resultKey order.
	bucketRunResults = []byte("run_results")
	// bucketRuns maps runID -> measurev1.Run (protobuf) without its planned
	// tests: the header that changes with every ended test. Run IDs are
	// ULIDs, so key order is creation order.
	bucketRuns = []byte("runs")
	// bucketRunPlanned maps runID -> measurev1.Run holding only the planned
	// tests, written once when the run is created.
	bucketRunPlanned = []byte("run_planned")
	// bucketAgents maps node name -> storev1.Agent (protobuf): the last known
	// registration of every node. Stores written before meshperf.store.v1
	// hold meshv1.Agent bytes here, which decode as the same record
	// (testdata/agent_meshv1.golden).
	bucketAgents = []byte("agents")
	// bucketRollups maps rollupKey -> measurev1.Rollup (protobuf): the
	// hourly summaries of results older than the retention.
	bucketRollups = []byte("rollups")
	// bucketTestResults maps testIndexKey (runID, testID, index) ->
	// resultKey: the one stored result of each sample of a test, so that a
	// result sent twice is stored once and an interrupted placeholder can
	// be found and replaced. Built from bucketResults when a store written
	// before it existed is opened.
	bucketTestResults = []byte("test_results")

	// The continuous mesh's series (series.go; layouts below and in
	// series_head.go). Node names are interned to 4-byte IDs so that keys
	// stay small.
	//
	// bucketSeriesNodes maps node name -> nodeID(4, big-endian).
	bucketSeriesNodes = []byte("series_nodes")
	// bucketSeriesNodeIDs maps nodeID(4, big-endian) -> node name; its
	// NextSequence numbers new names (IDs start at 1 and are never reused).
	bucketSeriesNodeIDs = []byte("series_node_ids")
	// bucketSeriesHead maps headKey (srcID, seq) -> one whole agent report
	// (series_head.go): where AppendReports writes, one key per report.
	bucketSeriesHead = []byte("series_head")
	// bucketSeriesChunks maps chunkKey (srcID, dstID, path, kind,
	// blockStart) -> a series chunk (coordinator/series) of the samples of
	// one series whose Start is in [blockStart, blockStart+SeriesBlock).
	// CompactSeries writes them from the head.
	bucketSeriesChunks = []byte("series_chunks")
	// bucketSeriesSeqs maps srcID(4, big-endian) -> the seqs of that
	// source's reports that left the head (compacted or deleted), so that
	// a resent report is still known: at most maxSeqRanges ranges, each
	// lo(8, big-endian) hi(8, big-endian), sorted and disjoint; once the
	// source's agent has had a seq epoch other than 0, they follow a
	// count byte and that many (epoch, offset) numberings (series_seqs.go).
	bucketSeriesSeqs = []byte("series_seqs")

	// bucketSeriesRollups maps a chunkKey whose block is a
	// SeriesRollupBlock (srcID, dstID, path, kind, dayStart) -> a rollup
	// chunk (coordinator/series EncodeRollups) of the hourly points of
	// one series in [dayStart, dayStart+SeriesRollupBlock). RollUpSeries
	// writes them from the chunks it deletes.
	bucketSeriesRollups = []byte("series_rollups")

	// bucketSeriesQuarantine maps bucket name, sep, key -> value of a
	// series chunk or rollup chunk that RollUpSeries could not decode: it
	// moves them aside (nothing is deleted) so that retention goes on past
	// them, and nothing in the coordinator reads or deletes them again;
	// they are there for an operator to look at.
	bucketSeriesQuarantine = []byte("series_quarantine")

	// bucketDispatched maps a work ID (runID/testID) -> dispatch time
	// (8 bytes, big-endian Unix nanoseconds) and the node the client work
	// went to: the tests in flight whose late answers may be taken
	// (dispatched.go).
	bucketDispatched = []byte("dispatched")

	allBuckets = [][]byte{bucketResults, bucketRunResults, bucketRuns, bucketRunPlanned, bucketAgents, bucketRollups, bucketTestResults,
		bucketSeriesNodes, bucketSeriesNodeIDs, bucketSeriesHead, bucketSeriesChunks, bucketSeriesSeqs, bucketSeriesRollups, bucketSeriesQuarantine,
		bucketDispatched}
)

// sep separates the variable-length parts of a key. Node names, run IDs
// and test IDs are validated not to contain it.
const sep = 0x00

// errBadKey reports a key that does not decode; it means a corrupt file.
var errBadKey = errors.New("malformed key")

// resultKey is
//
//	src 0x00 dst 0x00 startUnixNano(8, big-endian) runID 0x00 testID 0x00 index(4, big-endian)
//
// so that the results of one node pair over a time range are one cursor
// scan, in start-time order, and two runs never share a key even if their
// test IDs and start times agree. Start times are at or after the Unix
// epoch (AddResults refuses others), so the unsigned encoding sorts.
func resultKey(src, dst string, start time.Time, runID, testID string, index uint32) []byte {
	k := make([]byte, 0, len(src)+len(dst)+len(runID)+len(testID)+20)
	k = pairPrefix(k, src, dst)
	k = binary.BigEndian.AppendUint64(k, uint64(start.UnixNano()))
	k = append(k, runID...)
	k = append(k, sep)
	k = append(k, testID...)
	k = append(k, sep)
	return binary.BigEndian.AppendUint32(k, index)
}

// pairPrefix appends src 0x00 dst 0x00 to k.
func pairPrefix(k []byte, src, dst string) []byte {
	k = append(k, src...)
	k = append(k, sep)
	k = append(k, dst...)
	return append(k, sep)
}

// decodedKey is a resultKey taken apart.
type decodedKey struct {
	src, dst      string
	start         time.Time
	runID, testID string
}

func decodeResultKey(k []byte) (decodedKey, error) {
	bad := func() (decodedKey, error) { return decodedKey{}, fmt.Errorf("%w: %q", errBadKey, k) }
	parts := bytes.SplitN(k, []byte{sep}, 3) // src, dst, rest
	if len(parts) != 3 || len(parts[2]) < 8+1+1+4 {
		return bad()
	}
	rest := parts[2]
	ts, ids := rest[:8], rest[8:len(rest)-4]
	run, test, ok := bytes.Cut(ids, []byte{sep})
	if !ok || len(test) == 0 || test[len(test)-1] != sep {
		return bad()
	}
	return decodedKey{
		src: string(parts[0]), dst: string(parts[1]),
		start: time.Unix(0, int64(binary.BigEndian.Uint64(ts))),
		runID: string(run), testID: string(test[:len(test)-1]),
	}, nil
}

// timeBytes encodes t as it sits in a resultKey.
func timeBytes(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
}

// testIndexKey is
//
//	runID 0x00 testID 0x00 index(4, big-endian)
//
// so that the samples of one test are one prefix (testPrefix).
func testIndexKey(runID, testID string, index uint32) []byte {
	return binary.BigEndian.AppendUint32(testPrefix(runID, testID), index)
}

// testPrefix is runID 0x00 testID 0x00: the prefix of a test's
// testIndexKeys.
func testPrefix(runID, testID string) []byte {
	k := make([]byte, 0, len(runID)+len(testID)+6)
	k = append(k, runID...)
	k = append(k, sep)
	k = append(k, testID...)
	return append(k, sep)
}

// testIndexKeyOf is the testIndexKey of the result stored under rk.
func testIndexKeyOf(rk []byte) ([]byte, error) {
	dk, err := decodeResultKey(rk)
	if err != nil {
		return nil, err
	}
	return testIndexKey(dk.runID, dk.testID, binary.BigEndian.Uint32(rk[len(rk)-4:])), nil
}

// runResultKey is runID 0x00 resultKey.
func runResultKey(runID string, rk []byte) []byte {
	k := make([]byte, 0, len(runID)+1+len(rk))
	k = append(k, runID...)
	k = append(k, sep)
	return append(k, rk...)
}

// rollupKey is
//
//	src 0x00 dst 0x00 hourStartUnixNano(8, big-endian) path(4) test(4) params
//
// so that one pair's hourly history is one cursor scan in time order;
// params is rollupParams'.
func rollupKey(src, dst string, hour time.Time, path, test int32, params string) []byte {
	k := pairPrefix(make([]byte, 0, len(src)+len(dst)+len(params)+18), src, dst)
	k = binary.BigEndian.AppendUint64(k, uint64(hour.UnixNano()))
	k = binary.BigEndian.AppendUint32(k, uint32(path))
	k = binary.BigEndian.AppendUint32(k, uint32(test))
	return append(k, params...)
}

// SeriesBlock is the time block of one series chunk: a chunk holds the
// samples of one series whose Start is in [blockStart, blockStart+SeriesBlock),
// blockStart a multiple of SeriesBlock since the Unix epoch. Two hours of
// 10 s samples (720) make a chunk of about 4 to 6 KB: large enough that
// bbolt's per-key and page overheads are a few percent, small enough that
// a day of one pair is 12 gets and a ~70 KB decode.
const SeriesBlock = 2 * time.Hour

// SeriesRollupBlock is the time block of one rollup chunk: the hourly
// points (series.RollupBucket) of one series whose Start is in
// [blockStart, blockStart+SeriesRollupBlock), blockStart a multiple of it
// since the Unix epoch. A day is 24 points, some 250 bytes: the key's
// and bbolt's per-key overheads (about 34 bytes) stay near a byte a
// point, and a retention pass, which adds an hour or two to every
// series, rewrites a small value rather than a week's.
const SeriesRollupBlock = 24 * time.Hour

// rollupBlockOf is the start of the SeriesRollupBlock that holds t (Unix
// nanoseconds).
func rollupBlockOf(ns int64) int64 { return ns - ns%int64(SeriesRollupBlock) }

// headKey is srcID(4, big-endian) seq(8, big-endian): one source's
// reports are one prefix, in seq order.
func headKey(src uint32, seq uint64) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint32(k, src)
	binary.BigEndian.PutUint64(k[4:], seq)
	return k
}

// chunkKey is
//
//	srcID(4, big-endian) dstID(4, big-endian) path(1) kind(1) blockStartUnixNano(8, big-endian)
//
// so that one series' chunks are one prefix (seriesPrefix), in time order.
// The kind byte of an IPv6 series has v6Flag set (kinds are 1..7), so an
// IPv4 series keeps the bytes it had before families and the two families
// of a pair, path and kind are two prefixes.
func chunkKey(src, dst uint32, pk byte, block int64) []byte {
	return binary.BigEndian.AppendUint64(seriesPrefix(src, dst, pk), uint64(block))
}

// v6Flag is set in the kind nibble of an IPv6 series' pk (packPK).
const v6Flag = 0x08

// packPK is a series' path, kind and family as one byte: path<<4 | kind,
// with v6Flag for IPv6 (IP_FAMILY_UNSPECIFIED and IPV4 are IPv4). Paths
// are 1..15 and kinds 1..7 (series.ValidPath, series.ValidKind).
func packPK(path measurev1.Path, kind measurev1.ProbeKind, fam measurev1.IPFamily) byte {
	pk := byte(path)<<4 | byte(kind)
	if fam == measurev1.IPFamily_IP_FAMILY_IPV6 {
		pk |= v6Flag
	}
	return pk
}

// seriesPrefix is the first 10 bytes of a chunkKey; pk is packPK's.
func seriesPrefix(src, dst uint32, pk byte) []byte {
	k := make([]byte, 10, 18)
	binary.BigEndian.PutUint32(k, src)
	binary.BigEndian.PutUint32(k[4:], dst)
	k[8] = pk >> 4
	k[9] = pk & 0x0f
	return k
}

// nextSeries moves c past the rest of the series of chunk or rollup key
// k (its seriesPrefix; the keys are 18 bytes) and returns the first key
// and value of the next series; nil when there is none.
func nextSeries(c *bolt.Cursor, k []byte) (key, value []byte) {
	last := binary.BigEndian.AppendUint64(bytes.Clone(k[:10]), math.MaxUint64)
	key, value = c.Seek(last)
	if key != nil && bytes.Equal(key, last) {
		key, value = c.Next()
	}
	return key, value
}

// blockOf is the start of the SeriesBlock that holds t (Unix nanoseconds).
func blockOf(ns int64) int64 { return ns - ns%int64(SeriesBlock) }
