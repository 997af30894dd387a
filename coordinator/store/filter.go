package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds how a result Filter matches and scopes a listing.

func (f Filter) match(r *measurev1.Result) bool {
	switch {
	case f.SrcNode != "" && r.GetSrcNode() != f.SrcNode,
		f.DstNode != "" && r.GetDstNode() != f.DstNode,
		f.Path != measurev1.Path_PATH_UNSPECIFIED && r.GetPath() != f.Path,
		f.Test != measurev1.Test_TEST_UNSPECIFIED && r.GetSpec().GetTest() != f.Test,
		f.RunID != "" && r.GetRunId() != f.RunID,
		f.IPFamily != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED && protocol.ResultFamily(r.GetIpFamily()) != f.IPFamily:
		return false
	}
	return f.inTime(r.GetStartTime().AsTime())
}

func (f Filter) inTime(t time.Time) bool {
	return (f.Since.IsZero() || !t.Before(f.Since)) && (f.Until.IsZero() || t.Before(f.Until))
}

// scope fingerprints f for the page tokens of listing: every field counts.
func (f Filter) scope(listing byte) pageScope {
	b := newScope(listing).str(f.SrcNode).str(f.DstNode).num(int64(f.Path)).num(int64(f.Test)).
		str(f.RunID).time(f.Since).time(f.Until)
	if f.IPFamily != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		b = b.num(int64(f.IPFamily)) // absent: the tokens of before families stay valid
	}
	if f.Origin != measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED {
		b = b.str("origin").num(int64(f.Origin)) // likewise for the tokens of before origins
	}
	return b.sum()
}

// runOrigins holds, for one listing, the origin of each run its results
// name: testspec.OriginOf of the run's stored header, or
// RUN_ORIGIN_UNSPECIFIED for a run no longer stored. A listing reads each
// run's header once, whatever its number of results.
type runOrigins map[string]measurev1.RunOrigin

// ofResult returns the origin of the run of the encoded measurev1.Result
// v (of, for its run_id); bytes that are not a protobuf message are an
// error.
func (o runOrigins) ofResult(tx *bolt.Tx, v []byte) (measurev1.RunOrigin, error) {
	runID, err := resultRunID(v)
	if err != nil {
		return 0, err
	}
	return o.of(tx, runID)
}

// resultRunIDField is measurev1.Result's run_id field number.
const resultRunIDField = 3

// resultRunID reads the run_id of the encoded measurev1.Result v without
// decoding the rest: the last occurrence wins, as in proto.Unmarshal, and
// none is "". Bytes that are not a protobuf message are an error.
func resultRunID(v []byte) (string, error) {
	runID := ""
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		v = v[n:]
		if num == resultRunIDField && typ == protowire.BytesType {
			b, n := protowire.ConsumeBytes(v)
			if n < 0 {
				return "", protowire.ParseError(n)
			}
			runID, v = string(b), v[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, v)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		v = v[n:]
	}
	return runID, nil
}

// of returns run runID's origin, read in tx on first use; a header that
// does not decode is an error naming the run.
func (o runOrigins) of(tx *bolt.Tx, runID string) (measurev1.RunOrigin, error) {
	if origin, ok := o[runID]; ok {
		return origin, nil
	}
	origin := measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED
	if v := tx.Bucket(bucketRuns).Get([]byte(runID)); v != nil {
		run := &measurev1.Run{}
		if err := proto.Unmarshal(v, run); err != nil {
			return 0, fmt.Errorf("decode run %s: %w", runID, err)
		}
		origin = testspec.OriginOf(run)
	}
	o[runID] = origin
	return origin, nil
}

// page checks the request of a filtered listing: f's times
// (checkTimes), the page size (def when 0, at most most: resolvePageSize)
// and the page token, which must be listing's and f's. It returns the
// page size, f's scope for the next token and the key the page starts
// after (nil for the first page); errors wrap ErrInvalid, naming the
// field.
func (f Filter) page(listing byte, pageSize, def, most int, pageToken string) (int, pageScope, []byte, error) {
	if err := f.checkTimes(); err != nil {
		return 0, pageScope{}, nil, err
	}
	for _, id := range []struct{ field, v string }{{"src_node", f.SrcNode}, {"dst_node", f.DstNode}, {"run_id", f.RunID}} {
		if id.v == "" {
			continue
		}
		if err := validID(id.field, id.v); err != nil { // a NUL would reach past the key's field
			return 0, pageScope{}, nil, err
		}
	}
	pageSize, err := resolvePageSize("page_size", pageSize, def, most)
	if err != nil {
		return 0, pageScope{}, nil, err
	}
	scope := f.scope(listing)
	after, err := decodePageToken(pageToken, listing, scope)
	if err != nil {
		return 0, pageScope{}, nil, err
	}
	return pageSize, scope, after, nil
}

// checkTimes refuses a time range that is empty or outside what keys hold.
func (f Filter) checkTimes() error {
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fmt.Errorf("%w: start_time %v is not before end_time %v", ErrInvalid, f.Since, f.Until)
	}
	for _, b := range []struct {
		field string
		t     time.Time
	}{{"start_time", f.Since}, {"end_time", f.Until}} {
		if !b.t.IsZero() && (b.t.Before(time.Unix(0, 0)) || b.t.Year() > 2262) {
			return fmt.Errorf("%w: %s %v is outside 1970..2262", ErrInvalid, b.field, b.t)
		}
	}
	return nil
}
