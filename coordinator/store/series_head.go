package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/meshperf/meshperf/coordinator/series"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// A head report (the value of a headKey) is one agent report as it
// arrived, its summaries sorted by (dstID, path, kind):
//
//	version(1) = 1
//	start (uvarint, Unix nanoseconds)   period (uvarint, ns)
//	n (uvarint)                         summaries
//	index: ceil(n/headGroup) entries of 9 bytes, one per group of
//	       headGroup summaries: the group's first dstID(4, big-endian),
//	       pk(1) = path<<4 | kind (| v6Flag for IPv6: packPK), and the offset(4, big-endian) of its
//	       first summary in the body
//	body:  per summary, in order:
//	       dst delta (uvarint) and pk(1), except for a group's first
//	       (its index entry has them);
//	       flags(1): bit 0 status is not OK, bit 1 received != sent;
//	       sent (uvarint); if lossy: sent - received (uvarint);
//	       if not OK: status (uvarint), len(message) (uvarint), message;
//	       if received > 0, in series.RTTResolution ticks: median,
//	       median - min, p90 - median, max - p90 (uvarints).
//
// One destination is found by a binary search of the index and the
// decoding of at most headGroup summaries; a report of 400 summaries
// takes about 12 bytes a summary.
const (
	headVersion    = 1
	headGroup      = 16
	headIndexEntry = 9
)

// headEntry is one summary of a report being encoded; it holds no
// pointer (a report's entries are allocated without being scanned).
type headEntry struct {
	dst uint32
	pk  byte
	// prov says dst is not an ID yet but the index of a name in the
	// preparing worker's (prepWorker.names), for a report naming new
	// nodes.
	prov bool
	j    int32 // index in the report's summaries
}

// order is e's place in a sorted head: (dst, pk) as one integer.
func (e headEntry) order() uint64 { return uint64(e.dst)<<8 | uint64(e.pk) }

func pathKind(m *series.Summary) byte { return packPK(m.Path, m.Kind, m.Family) }

// encodeHead appends the head value of a report whose entries are sorted
// and distinct.
func encodeHead(dst []byte, start time.Time, period time.Duration, summaries []series.Summary, entries []headEntry) []byte {
	dst = append(dst, headVersion)
	dst = binary.AppendUvarint(dst, uint64(start.UnixNano()))
	dst = binary.AppendUvarint(dst, uint64(period))
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	groups := (len(entries) + headGroup - 1) / headGroup
	index := len(dst)
	dst = append(dst, make([]byte, groups*headIndexEntry)...)
	body := len(dst)
	for i, e := range entries {
		// A summary but its message takes at most maxSummaryBytes: it is
		// written in place, without append's checks for each byte.
		if cap(dst)-len(dst) < maxSummaryBytes {
			dst = slices.Grow(dst, maxSummaryBytes+(len(entries)-i)*8)
		}
		n := len(dst)
		b := dst[n : n+maxSummaryBytes]
		k := 0
		if i&(headGroup-1) == 0 {
			ix := dst[index+i/headGroup*headIndexEntry:]
			binary.BigEndian.PutUint32(ix, e.dst)
			ix[4] = e.pk
			binary.BigEndian.PutUint32(ix[5:], uint32(n-body))
		} else {
			k = putUvarint(b, k, uint64(e.dst-entries[i-1].dst))
			b[k] = e.pk
			k++
		}
		m := &summaries[e.j]
		ok, lossy := m.Status == measurev1.Status_STATUS_OK, m.Received != m.Sent
		var flags byte
		if !ok {
			flags |= 1
		}
		if lossy {
			flags |= 2
		}
		b[k] = flags
		k = putUvarint(b, k+1, uint64(m.Sent))
		if lossy {
			k = putUvarint(b, k, uint64(m.Sent-m.Received))
		}
		if !ok {
			k = putUvarint(b, k, uint64(m.Status))
			k = putUvarint(b, k, uint64(len(m.Message)))
			dst = append(dst[:n+k], m.Message...)
			n, k = len(dst), 0
			if cap(dst)-n < maxSummaryBytes {
				dst = slices.Grow(dst, maxSummaryBytes+(len(entries)-i)*8)
			}
			b = dst[n : n+maxSummaryBytes]
		}
		if m.Received > 0 {
			mn, md, p90, mx := ticks(m.RTTMin), ticks(m.RTTMedian), ticks(m.RTTP90), ticks(m.RTTMax)
			k = putUvarint(b, k, md)
			k = putUvarint(b, k, md-mn)
			k = putUvarint(b, k, p90-md)
			k = putUvarint(b, k, mx-p90)
		}
		dst = dst[:n+k]
	}
	return dst
}

// maxSummaryBytes bounds a head summary's bytes but its message's: dst
// delta and sent, lost, status and message length (5 each at most, as
// uint32s), pk, flags and four round trips (of at most MaxRTT, 36e9
// ticks: 6 each).
const maxSummaryBytes = 5*5 + 2 + 4*6

// ticks is series.Ticks(d) for a validated d (in [0, MaxRTT]), in
// unsigned arithmetic (a division by a constant without the sign's fix).
func ticks(d time.Duration) uint64 {
	return uint64(d+series.RTTResolution/2) / uint64(series.RTTResolution)
}

// putUvarint writes x as a uvarint at b[k:] and returns the index after.
func putUvarint(b []byte, k int, x uint64) int {
	for x >= 0x80 {
		b[k] = byte(x) | 0x80
		x >>= 7
		k++
	}
	b[k] = byte(x)
	return k + 1
}

// head is a parsed head value.
type head struct {
	start  time.Time
	period time.Duration
	n      int
	index  []byte
	body   []byte
}

func (h *head) end() time.Time { return h.start.Add(h.period) }

func corruptHead(what string) error {
	return fmt.Errorf("%w: series head report: %s", ErrCorrupt, what)
}

// parseHead reads a head value's header; only its index and body are
// kept (not copied).
func parseHead(v []byte) (head, error) {
	var h head
	if len(v) == 0 || v[0] != headVersion {
		return h, corruptHead("version")
	}
	p := v[1:]
	var vals [3]uint64
	for i := range vals {
		u, k := binary.Uvarint(p)
		if k <= 0 {
			return h, corruptHead("header")
		}
		vals[i], p = u, p[k:]
	}
	if vals[0] == 0 || vals[0] > math.MaxInt64 || vals[1] == 0 || vals[1] > uint64(series.MaxPeriod) || vals[2] > uint64(len(p)) {
		return h, corruptHead("header values")
	}
	h.start, h.period, h.n = time.Unix(0, int64(vals[0])).UTC(), time.Duration(vals[1]), int(vals[2])
	ix := (h.n + headGroup - 1) / headGroup * headIndexEntry
	if ix > len(p) {
		return h, corruptHead("index")
	}
	h.index, h.body = p[:ix], p[ix:]
	return h, nil
}

// headCursor decodes a head's summaries one after another.
type headCursor struct {
	h   *head
	i   int    // next summary
	off int    // its offset in body
	dst uint32 // previous summary's
	pk  byte
}

// seek places the cursor on group g's first summary.
func (c *headCursor) seek(g int) error {
	ix := c.h.index[g*headIndexEntry:]
	c.i, c.off = g*headGroup, int(binary.BigEndian.Uint32(ix[5:]))
	c.dst, c.pk = binary.BigEndian.Uint32(ix), ix[4]
	if c.off > len(c.h.body) {
		return corruptHead("index offset")
	}
	return nil
}

// next decodes the next summary into s (Start and Period from the head)
// and returns its dstID and pk.
func (c *headCursor) next(s *series.Sample) (uint32, byte, error) {
	b := c.h.body[c.off:]
	uv := func() uint64 {
		u, k := binary.Uvarint(b)
		if k <= 0 {
			b = nil
			return math.MaxUint64
		}
		b = b[k:]
		return u
	}
	bad := func(what string) (uint32, byte, error) { return 0, 0, corruptHead(what) }
	if c.i%headGroup != 0 {
		d := uv()
		if d > math.MaxUint32 || len(b) == 0 {
			return bad("dst")
		}
		c.dst += uint32(d)
		c.pk, b = b[0], b[1:]
	}
	if len(b) == 0 {
		return bad("flags")
	}
	flags := b[0]
	b = b[1:]
	sent := uv()
	if sent > math.MaxUint32 {
		return bad("sent")
	}
	*s = series.Sample{Start: c.h.start, Period: c.h.period, Sent: uint32(sent), Received: uint32(sent),
		Status: measurev1.Status_STATUS_OK}
	if flags&2 != 0 {
		lost := uv()
		if lost > sent {
			return bad("lost")
		}
		s.Received -= uint32(lost)
	}
	if flags&1 != 0 {
		st, n := uv(), uv()
		if st > math.MaxInt32 || n > series.MaxMessageBytes || n > uint64(len(b)) {
			return bad("status")
		}
		s.Status, s.Message, b = measurev1.Status(st), string(b[:n]), b[n:]
	}
	if s.Received > 0 {
		md, mn, p90, mx := uv(), uv(), uv(), uv()
		limit := series.Ticks(series.MaxRTT)
		if md > limit || mn > md || p90 > limit || mx > limit {
			return bad("round trips")
		}
		s.RTTMin, s.RTTMedian = series.FromTicks(md-mn), series.FromTicks(md)
		s.RTTP90, s.RTTMax = series.FromTicks(md+p90), series.FromTicks(md+p90+mx)
	}
	if b == nil {
		return bad("summary")
	}
	c.off = len(c.h.body) - len(b)
	c.i++
	return c.dst, c.pk, nil
}

// each calls fn for every summary of h in order.
func (h *head) each(fn func(dst uint32, pk byte, s *series.Sample) error) error {
	c := headCursor{h: h}
	var s series.Sample
	for c.i < h.n {
		if c.i%headGroup == 0 {
			if err := c.seek(c.i / headGroup); err != nil {
				return err
			}
		}
		dst, pk, err := c.next(&s)
		if err != nil {
			return err
		}
		if err := fn(dst, pk, &s); err != nil {
			return err
		}
	}
	return nil
}

// find decodes the summary of (dst, pk) into s; false if h has none.
func (h *head) find(dst uint32, pk byte, s *series.Sample) (bool, error) {
	groups := len(h.index) / headIndexEntry
	// The last group whose first summary is at or before (dst, pk).
	lo, hi := 0, groups
	for lo < hi {
		mid := (lo + hi) / 2
		ix := h.index[mid*headIndexEntry:]
		if k := binary.BigEndian.Uint32(ix); k < dst || k == dst && ix[4] <= pk {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return false, nil
	}
	c := headCursor{h: h}
	if err := c.seek(lo - 1); err != nil {
		return false, err
	}
	for end := min(c.i+headGroup, h.n); c.i < end; {
		d, p, err := c.next(s)
		if err != nil {
			return false, err
		}
		if d == dst && p == pk {
			return true, nil
		}
		if d > dst || d == dst && p > pk {
			return false, nil
		}
	}
	return false, nil
}
