package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Buckets. Every bucket the coordinator uses is declared here, once.
var (
	// bucketResults maps resultKey -> measurev1.Result (protobuf).
	bucketResults = []byte("results")
	// bucketRunResults maps runID 0x00 resultKey -> nothing: the results of
	// one run, in resultKey order.
	bucketRunResults = []byte("run_results")
	// bucketRuns maps runID -> measurev1.Run (protobuf). Run IDs are ULIDs,
	// so key order is creation order.
	bucketRuns = []byte("runs")
	// bucketAgents maps node name -> meshv1.Agent (protobuf): the last known
	// registration of every node.
	bucketAgents = []byte("agents")

	allBuckets = [][]byte{bucketResults, bucketRunResults, bucketRuns, bucketAgents}
)

// sep separates the variable-length parts of a key. Node names, run IDs
// and test IDs are validated not to contain it.
const sep = 0x00

// errBadKey reports a key that does not decode; it means a corrupt file.
var errBadKey = errors.New("malformed key")

// resultKey is
//
//	src 0x00 dst 0x00 startUnixNano(8, big-endian) testID 0x00 index(4, big-endian)
//
// so that the results of one node pair over a time range are one cursor
// scan, in start-time order.
func resultKey(src, dst string, start time.Time, testID string, index uint32) []byte {
	k := make([]byte, 0, len(src)+len(dst)+len(testID)+16)
	k = pairPrefix(k, src, dst)
	k = binary.BigEndian.AppendUint64(k, uint64(start.UnixNano()))
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
	src, dst string
	start    time.Time
}

func decodeResultKey(k []byte) (decodedKey, error) {
	i := bytes.IndexByte(k, sep)
	if i < 0 {
		return decodedKey{}, fmt.Errorf("%w: %q", errBadKey, k)
	}
	j := bytes.IndexByte(k[i+1:], sep)
	if j < 0 || len(k) < i+1+j+1+8 {
		return decodedKey{}, fmt.Errorf("%w: %q", errBadKey, k)
	}
	ts := k[i+1+j+1:]
	return decodedKey{
		src:   string(k[:i]),
		dst:   string(k[i+1 : i+1+j]),
		start: time.Unix(0, int64(binary.BigEndian.Uint64(ts[:8]))),
	}, nil
}

// timeBytes encodes t as it sits in a resultKey.
func timeBytes(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
}

// runResultKey is runID 0x00 resultKey.
func runResultKey(runID string, rk []byte) []byte {
	k := make([]byte, 0, len(runID)+1+len(rk))
	k = append(k, runID...)
	k = append(k, sep)
	return append(k, rk...)
}
