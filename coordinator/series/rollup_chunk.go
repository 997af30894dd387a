package series

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// A rollup chunk holds the rollup points of one series, in strictly
// increasing Start order:
//
//	version(1) = 1, count (uvarint), then a bit stream as in a sample
//	chunk (var(v) alike), most significant bit first, zero-padded:
//
// per point, against the previous one (for the first: hour 0, periods 0,
// sent 0, median 0):
//
//	start    the first point: var(Start in Unix hours). Then '0' for the
//	         next hour, else '1' var(hours - previous hours - 2).
//	periods  '0' same as the previous, else '1' var(periods)
//	sent     '0' same as the previous, else '1' var(sent)
//	lost     '0' received == sent, else '1' var(sent - received)
//	failed   '0' none, else '1' var(failed) var(last status)
//	rtts     only if received > 0, in RTTResolution ticks:
//	         var(zigzag(median - prevMedian)), var(median - min),
//	         var(p90 - median), var(max - p90).
//
// An hour of a steady 10 s series (360 periods, the same probes sent)
// takes about 8 to 11 bytes.
const rollupChunkVersion = 1

// minRollupBits is the fewest bits a point after the first takes; it
// bounds the count a rollup chunk may claim.
const minRollupBits = 5

// rollupState is what the next point is encoded against.
type rollupState struct {
	hours, periods, sent, median uint64
	n                            int
}

// maxRollupHours is the last Unix hour a rollup may start at.
var maxRollupHours = uint64(maxTime.Add(-RollupBucket).Unix() / 3600)

// EncodeRollups is the rollup chunk of points, which must be valid and in
// strictly increasing Start order (the error wraps ErrInvalid, names the
// point's index and the field).
func EncodeRollups(points []Rollup) ([]byte, error) {
	var w bitWriter
	var p rollupState
	for i, r := range points {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("rollup %d: %w", i, err)
		}
		hours := uint64(r.Start.Unix() / 3600)
		if p.n > 0 && hours <= p.hours {
			return nil, fmt.Errorf("%w: rollup %d: start %v is not after the previous point's", ErrInvalid, i, r.Start)
		}
		switch {
		case p.n == 0:
			w.writeVar(hours)
		case hours == p.hours+1:
			w.writeBit(false)
		default:
			w.writeBit(true)
			w.writeVar(hours - p.hours - 2)
		}
		w.writeBit(r.Periods != p.periods)
		if r.Periods != p.periods {
			w.writeVar(r.Periods)
		}
		w.writeBit(r.Sent != p.sent)
		if r.Sent != p.sent {
			w.writeVar(r.Sent)
		}
		w.writeBit(r.Received != r.Sent)
		if r.Received != r.Sent {
			w.writeVar(r.Sent - r.Received)
		}
		w.writeBit(r.Failed > 0)
		if r.Failed > 0 {
			w.writeVar(r.Failed)
			w.writeVar(uint64(r.LastStatus))
		}
		median := p.median
		if r.Received > 0 {
			median = writeRTTs(&w, median, r.RTTMin, r.RTTMedian, r.RTTP90, r.RTTMax)
		}
		p = rollupState{hours: hours, periods: r.Periods, sent: r.Sent, median: median, n: p.n + 1}
	}
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(w.buf))
	out = append(out, rollupChunkVersion)
	out = binary.AppendUvarint(out, uint64(p.n))
	return append(out, w.buf...), nil
}

// RollupsLen is the number of points a rollup chunk holds, read from its
// header only; the error wraps ErrCorrupt if the header does not decode.
func RollupsLen(data []byte) (int, error) {
	n, _, err := rollupHeader(data)
	return n, err
}

func rollupHeader(data []byte) (n int, body []byte, err error) {
	// The first point takes at least 6 bits (its hour), every other one
	// minRollupBits.
	return countedHeader(data, rollupChunkVersion, "rollup chunk", "points", 6, minRollupBits)
}

// DecodeRollups is the points of a rollup chunk, in Start order, times in
// UTC. Data that is not a chunk EncodeRollups made gives an error
// wrapping ErrCorrupt (never a panic, never more work than its length).
func DecodeRollups(data []byte) ([]Rollup, error) {
	return AppendRollups(nil, data)
}

// AppendRollups appends the points of a rollup chunk to dst, as
// DecodeRollups.
func AppendRollups(dst []Rollup, data []byte) ([]Rollup, error) {
	n, body, err := rollupHeader(data)
	if err != nil {
		return dst, err
	}
	r := bitReader{data: body}
	var p rollupState
	for i := 0; i < n; i++ {
		pt, next, err := decodeRollup(&r, p)
		if err != nil {
			return dst, fmt.Errorf("%w: rollup %d: %w", ErrCorrupt, i, err)
		}
		p = next
		dst = append(dst, pt)
	}
	return dst, r.checkEnd("rollup", "rollup ")
}

// readFlagVar reads a flag bit and, if set, a var; unset gives def.
func readFlagVar(r *bitReader, def uint64) (uint64, bool, error) {
	set, err := r.readBit()
	if err != nil || !set {
		return def, false, err
	}
	v, err := r.readVar()
	return v, true, err
}

func decodeRollup(r *bitReader, p rollupState) (Rollup, rollupState, error) {
	var pt Rollup
	var hours uint64
	if p.n == 0 {
		v, err := r.readVar()
		if err != nil {
			return pt, p, err
		}
		hours = v
	} else {
		gap, set, err := readFlagVar(r, 0)
		if err != nil {
			return pt, p, err
		}
		if gap > maxRollupHours {
			return pt, p, errValue("start out of range")
		}
		hours = p.hours + 1 // the next hour
		if set {
			hours += 1 + gap // a gap of 2 hours or more
		}
	}
	if hours == 0 || hours > maxRollupHours {
		return pt, p, errValue("start out of range")
	}
	periods, _, err := readFlagVar(r, p.periods)
	if err != nil {
		return pt, p, err
	}
	if periods == 0 {
		return pt, p, errValue("no periods")
	}
	sent, _, err := readFlagVar(r, p.sent)
	if err != nil {
		return pt, p, err
	}
	lost, _, err := readFlagVar(r, 0)
	if err != nil {
		return pt, p, err
	}
	if lost > sent {
		return pt, p, errValue("lost more than sent")
	}
	pt.LastStatus = measurev1.Status_STATUS_OK
	failed, set, err := readFlagVar(r, 0)
	if err != nil {
		return pt, p, err
	}
	if set {
		if failed == 0 || failed > periods {
			return pt, p, errValue("failed periods out of range")
		}
		st, err := r.readVar()
		if err != nil {
			return pt, p, err
		}
		if st > math.MaxInt32 || st == uint64(measurev1.Status_STATUS_OK) || ValidStatus("last_status", measurev1.Status(st)) != nil {
			return pt, p, errValue("status out of range")
		}
		pt.LastStatus = measurev1.Status(st)
	}
	received := sent - lost
	median := p.median
	if received > 0 {
		if pt.RTTMin, pt.RTTMedian, pt.RTTP90, pt.RTTMax, median, err = readRTTs(r, median); err != nil {
			return pt, p, err
		}
	}
	pt.Start = time.Unix(int64(hours)*3600, 0).UTC()
	pt.Periods, pt.Sent, pt.Received, pt.Failed = periods, sent, received, failed
	return pt, rollupState{hours: hours, periods: periods, sent: sent, median: median, n: p.n + 1}, nil
}
