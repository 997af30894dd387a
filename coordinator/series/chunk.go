package series

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// A chunk holds the samples of one series, in strictly increasing Start
// order:
//
//	version(1) = 1, count (uvarint), then a bit stream, most significant
//	bit first, zero-padded to a byte:
//
// per sample, against the previous one (for the first: start 0, period
// 0, sent 0, median 0):
//
//	start   the first sample: 64 bits of Unix nanoseconds. Then a
//	        delta of delta: d = (start - prevStart) - prevPeriod, which is
//	        0 for back-to-back periods (the previous delta is the previous
//	        period in a regular series; using the period also keeps an
//	        early-ended period free): '0' if d is 0, else '1' var(zigzag(d)).
//	period  '0' same as the previous, else '1' var(period ns)
//	sent    '0' same as the previous, else '1' var(sent)
//	lost    '0' received == sent, else '1' var(sent - received)
//	status  '0' STATUS_OK (no message), else '1' var(status)
//	        var(len(message)) and the message's bytes, 8 bits each
//	rtts    only if received > 0, in RTTResolution ticks:
//	        var(zigzag(median - prevMedian)), var(median - min),
//	        var(p90 - median), var(max - p90): offsets are non-negative
//	        because min <= median <= p90 <= max is validated; max is
//	        offset from p90, which is nearer than the median.
//
// var(v) is v in the smallest of five buckets: '0' and 5 bits, '10' and
// 9 bits, '110' and 13 bits, '1110' and 20 bits, '1111' and 64 bits. A
// regular, loss-free 10 s sample of a ~200 µs path takes about 7 bytes.
const chunkVersion = 1

// minSampleBits is the fewest bits a sample after the first takes; it
// bounds the count a chunk may claim.
const minSampleBits = 5

// state is what the next sample is encoded against.
type state struct {
	start, period int64 // ns
	sent          uint32
	median        uint64 // ticks
	n             int
}

// Encoder builds one chunk sample by sample. The zero value is an empty
// chunk.
type Encoder struct {
	w    bitWriter
	prev state
}

// Len is the number of samples appended.
func (e *Encoder) Len() int { return e.prev.n }

// Last is the Start of the last sample appended (the zero time if none).
func (e *Encoder) Last() time.Time {
	if e.prev.n == 0 {
		return time.Time{}
	}
	return time.Unix(0, e.prev.start).UTC()
}

// Append validates s (the error wraps ErrInvalid and names the field) and
// appends it; its Start must be after the previous sample's, else the
// error wraps ErrInvalid too and the encoder is unchanged. Round trips
// are rounded to RTTResolution; a message is dropped when the status is
// OK.
func (e *Encoder) Append(s Sample) error {
	if err := s.Validate(); err != nil {
		return err
	}
	start := s.Start.UnixNano()
	if e.prev.n > 0 && start <= e.prev.start {
		return fmt.Errorf("%w: start %v is not after the previous sample's %v", ErrInvalid, s.Start, e.Last())
	}
	w, p := &e.w, e.prev
	if p.n == 0 {
		w.writeBits(uint64(start), 64)
	} else if d := start - p.start - p.period; d == 0 {
		w.writeBit(false)
	} else {
		w.writeBit(true)
		w.writeVar(zigzag(d))
	}
	period := int64(s.Period)
	w.writeBit(period != p.period)
	if period != p.period {
		w.writeVar(uint64(period))
	}
	w.writeBit(s.Sent != p.sent)
	if s.Sent != p.sent {
		w.writeVar(uint64(s.Sent))
	}
	w.writeBit(s.Received != s.Sent)
	if s.Received != s.Sent {
		w.writeVar(uint64(s.Sent - s.Received))
	}
	ok := s.Status == measurev1.Status_STATUS_OK
	w.writeBit(!ok)
	if !ok {
		w.writeVar(uint64(s.Status))
		w.writeVar(uint64(len(s.Message)))
		for i := 0; i < len(s.Message); i++ {
			w.writeBits(uint64(s.Message[i]), 8)
		}
	}
	median := p.median
	if s.Received > 0 {
		median = writeRTTs(w, median, s.RTTMin, s.RTTMedian, s.RTTP90, s.RTTMax)
	}
	e.prev = state{start: start, period: period, sent: s.Sent, median: median, n: p.n + 1}
	return nil
}

// Bytes is the chunk of the samples appended so far (a new slice).
func (e *Encoder) Bytes() []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(e.w.buf))
	out = append(out, chunkVersion)
	out = binary.AppendUvarint(out, uint64(e.prev.n))
	return append(out, e.w.buf...)
}

// EncodeChunk is the chunk of samples, which must be valid and in
// strictly increasing Start order (the error wraps ErrInvalid, names the
// sample's index and the field).
func EncodeChunk(samples []Sample) ([]byte, error) {
	var e Encoder
	for i, s := range samples {
		if err := e.Append(s); err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
	}
	return e.Bytes(), nil
}

// ChunkLen is the number of samples a chunk holds, read from its header
// only; the error wraps ErrCorrupt if the header does not decode.
func ChunkLen(data []byte) (int, error) {
	n, _, err := chunkHeader(data)
	return n, err
}

func chunkHeader(data []byte) (n int, body []byte, err error) {
	return countedHeader(data, chunkVersion, "chunk", "samples", 64, minSampleBits)
}

// countedHeader splits a chunk of either codec into its count and body:
// a version byte, then the count as a uvarint. The first item takes at
// least firstBits of the body, every other one minBits, so that a count
// the body cannot hold is refused before any work. The errors wrap
// ErrCorrupt and name the chunk kind (what) and its items (unit).
func countedHeader(data []byte, version byte, what, unit string, firstBits, minBits uint64) (n int, body []byte, err error) {
	if len(data) < 2 || data[0] != version {
		return 0, nil, fmt.Errorf("%w: %s version or length", ErrCorrupt, what)
	}
	count, k := binary.Uvarint(data[1:])
	if k <= 0 {
		return 0, nil, fmt.Errorf("%w: %s count", ErrCorrupt, what)
	}
	body = data[1+k:]
	bits := uint64(len(body)) * 8
	if count > 0 && (bits < firstBits || count-1 > (bits-firstBits)/minBits) {
		return 0, nil, fmt.Errorf("%w: %s claims %d %s in %d bytes", ErrCorrupt, what, count, unit, len(body))
	}
	return int(count), body, nil
}

// DecodeChunk is the samples of a chunk, in Start order, times in UTC.
// Data that is not a chunk EncodeChunk or Encoder made gives an error
// wrapping ErrCorrupt (never a panic, never more work than its length).
func DecodeChunk(data []byte) ([]Sample, error) {
	out, err := AppendChunk(nil, data, time.Time{}, time.Time{})
	return out, err
}

// AppendChunk appends to dst the samples of a chunk whose Start is in
// [from, to) (a zero from or to: unbounded), as DecodeChunk.
func AppendChunk(dst []Sample, data []byte, from, to time.Time) ([]Sample, error) {
	n, body, err := chunkHeader(data)
	if err != nil {
		return dst, err
	}
	r := bitReader{data: body}
	var p state
	fromNs, toNs := int64(math.MinInt64), int64(math.MaxInt64)
	if !from.IsZero() {
		fromNs = from.UnixNano()
	}
	if !to.IsZero() {
		toNs = to.UnixNano()
	}
	for i := 0; i < n; i++ {
		s, next, err := decodeSample(&r, p)
		if err != nil {
			return dst, fmt.Errorf("%w: sample %d: %w", ErrCorrupt, i, err)
		}
		p = next
		if p.start >= fromNs && p.start < toNs {
			dst = append(dst, s)
		}
	}
	return dst, r.checkEnd("sample", "")
}

// errValue means a decoded value is out of its range.
type errValue string

func (e errValue) Error() string { return string(e) }

func decodeSample(r *bitReader, p state) (Sample, state, error) {
	var s Sample
	var start int64
	if p.n == 0 {
		v, err := r.readBits(64)
		if err != nil {
			return s, p, err
		}
		start = int64(v)
	} else {
		u, _, err := readFlagVar(r, 0)
		if err != nil {
			return s, p, err
		}
		d := unzigzag(u) // 0 when the start did not move
		var ok bool
		if start, ok = addInt(p.start, p.period); ok {
			start, ok = addInt(start, d)
		}
		if !ok || start <= p.start {
			return s, p, errValue("start does not grow")
		}
	}
	if start <= 0 || start > maxTime.Add(-MaxPeriod).UnixNano() {
		return s, p, errValue("start out of range")
	}
	period := p.period
	if v, changed, err := readFlagVar(r, 0); err != nil {
		return s, p, err
	} else if changed {
		if v == 0 || v > uint64(MaxPeriod) {
			return s, p, errValue("period out of range")
		}
		period = int64(v)
	}
	if period == 0 {
		return s, p, errValue("no period")
	}
	sent := p.sent
	if v, changed, err := readFlagVar(r, 0); err != nil {
		return s, p, err
	} else if changed {
		if v > math.MaxUint32 {
			return s, p, errValue("sent out of range")
		}
		sent = uint32(v)
	}
	received := sent
	if v, lossy, err := readFlagVar(r, 0); err != nil {
		return s, p, err
	} else if lossy {
		if v > uint64(sent) {
			return s, p, errValue("lost more than sent")
		}
		received = sent - uint32(v)
	}
	s.Status = measurev1.Status_STATUS_OK
	if v, failed, err := readFlagVar(r, 0); err != nil {
		return s, p, err
	} else if failed {
		if v > math.MaxInt32 || ValidStatus("status", measurev1.Status(v)) != nil || v == uint64(measurev1.Status_STATUS_OK) {
			return s, p, errValue("status out of range")
		}
		s.Status = measurev1.Status(v)
		n, err := r.readVar()
		if err != nil {
			return s, p, err
		}
		if n > MaxMessageBytes {
			return s, p, errValue("message too long")
		}
		msg := make([]byte, n)
		for i := range msg {
			b, err := r.readBits(8)
			if err != nil {
				return s, p, err
			}
			msg[i] = byte(b)
		}
		s.Message = string(msg)
	}
	median := p.median
	if received > 0 {
		var err error
		if s.RTTMin, s.RTTMedian, s.RTTP90, s.RTTMax, median, err = readRTTs(r, median); err != nil {
			return s, p, err
		}
	}
	s.Start, s.Period, s.Sent, s.Received = time.Unix(0, start).UTC(), time.Duration(period), sent, received
	return s, state{start: start, period: period, sent: sent, median: median, n: p.n + 1}, nil
}

// writeRTTs writes the round trips of a sample or rollup point that
// received something, as readRTTs reads them, against prev, the previous
// median in ticks; it returns the new median in ticks.
func writeRTTs(w *bitWriter, prev uint64, rttMin, rttMedian, rttP90, rttMax time.Duration) (median uint64) {
	mn, md, p90, mx := Ticks(rttMin), Ticks(rttMedian), Ticks(rttP90), Ticks(rttMax)
	w.writeVar(zigzag(int64(md) - int64(prev)))
	w.writeVar(md - mn)
	w.writeVar(p90 - md)
	w.writeVar(mx - p90)
	return md
}

// readRTTs reads the round trips of a sample or rollup point that
// received something: four varints, the median's change from prev (the
// previous median, zigzag), min below the median, p90 above it and max
// above p90, all in ticks. It returns them and the new median in ticks;
// a value out of range is an errValue.
func readRTTs(r *bitReader, prev uint64) (rttMin, rttMedian, rttP90, rttMax time.Duration, median uint64, err error) {
	var v [4]uint64
	for i := range v {
		if v[i], err = r.readVar(); err != nil {
			return 0, 0, 0, 0, prev, err
		}
	}
	maxTicks := Ticks(MaxRTT)
	md, ok := addInt(int64(prev), unzigzag(v[0]))
	if !ok || md < 0 || uint64(md) > maxTicks || v[1] > uint64(md) ||
		v[2] > maxTicks || v[3] > maxTicks || uint64(md)+v[2]+v[3] > maxTicks {
		return 0, 0, 0, 0, prev, errValue("round trip out of range")
	}
	median = uint64(md)
	return FromTicks(median - v[1]), FromTicks(median), FromTicks(median + v[2]), FromTicks(median + v[2] + v[3]), median, nil
}

// addInt is a+b and whether it did not overflow.
func addInt(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}
