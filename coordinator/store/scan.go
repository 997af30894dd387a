package store

import (
	"bytes"
	"time"
)

// This file holds how ListResults walks the results bucket or an index
// for a filter: which bucket, which key prefix, where to start and where
// to stop.

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
