package series

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// RollupBucket is the span of one rollup point: the samples of a series
// whose Start lies in one UTC hour (a multiple of RollupBucket since the
// Unix epoch) fold into one Rollup. An hour keeps a day of one series at
// 24 points (a 30-day history of a pair in one page) and is 1/360 of the
// raw points at 10 s periods; it divides the raw chunks' 2 h block, so a
// raw chunk rolls up into whole hours.
const RollupBucket = time.Hour

// Rollup is one series' report periods of one RollupBucket folded into
// one point: what retention keeps of raw samples past the raw retention.
type Rollup struct {
	// Start is the bucket's start, a multiple of RollupBucket since the
	// Unix epoch, in UTC; the bucket is [Start, Start+RollupBucket).
	Start time.Time
	// Periods counts the report periods (samples) folded in, at least 1.
	Periods uint64
	// Sent is the probes sent over those periods; Received, at most Sent,
	// those answered (the loss ratio is 1 - Received/Sent).
	Sent, Received uint64
	// RTTMin is the smallest period minimum and RTTMax the largest period
	// maximum: exact. RTTMedian and RTTP90 estimate the median and 90th
	// percentile of every answered probe's round trip in the bucket (see
	// Fold). RTTMin <= RTTMedian <= RTTP90 <= RTTMax <= MaxRTT, at
	// RTTResolution; all zero when Received is 0.
	RTTMin, RTTMedian, RTTP90, RTTMax time.Duration
	// Failed counts the periods whose status was not STATUS_OK, at most
	// Periods.
	Failed uint64
	// LastStatus is the last failed period's status (STATUS_OK when
	// Failed is 0). Failure messages are not kept.
	LastStatus measurev1.Status
}

// End is Start + RollupBucket.
func (r Rollup) End() time.Time { return r.Start.Add(RollupBucket) }

// BucketOf is the start of the RollupBucket that holds t, in UTC.
func BucketOf(t time.Time) time.Time { return t.UTC().Truncate(RollupBucket) }

// Validate checks every field of r; the error wraps ErrInvalid and names
// the field and its value.
func (r Rollup) Validate() error {
	ns := r.Start.UnixNano()
	switch {
	case !r.Start.After(time.Unix(0, 0)) || !r.Start.Before(maxTime.Add(-RollupBucket)):
		return fmt.Errorf("%w: rollup start %v is not after the Unix epoch (or past 2262)", ErrInvalid, r.Start)
	case ns%int64(RollupBucket) != 0:
		return fmt.Errorf("%w: rollup start %v is not on a %v boundary", ErrInvalid, r.Start, RollupBucket)
	case r.Periods == 0:
		return fmt.Errorf("%w: rollup periods is 0", ErrInvalid)
	case r.Received > r.Sent:
		return fmt.Errorf("%w: rollup received %d is above sent %d", ErrInvalid, r.Received, r.Sent)
	case r.Failed > r.Periods:
		return fmt.Errorf("%w: rollup failed %d is above periods %d", ErrInvalid, r.Failed, r.Periods)
	case r.Failed == 0 && r.LastStatus != measurev1.Status_STATUS_OK:
		return fmt.Errorf("%w: rollup last_status %v without a failed period", ErrInvalid, r.LastStatus)
	case r.Failed > 0 && (r.LastStatus == measurev1.Status_STATUS_OK || ValidStatus("last_status", r.LastStatus) != nil):
		return fmt.Errorf("%w: rollup last_status %d is not a failure status", ErrInvalid, int32(r.LastStatus))
	}
	rtt := [4]time.Duration{r.RTTMin, r.RTTMedian, r.RTTP90, r.RTTMax}
	for i, d := range rtt {
		if d < 0 || d > MaxRTT {
			return fmt.Errorf("%w: rollup %s %v is not in [0, %v]", ErrInvalid, rttNames[i], d, MaxRTT)
		}
		if r.Received == 0 && d != 0 {
			return fmt.Errorf("%w: rollup %s %v is not 0 while received is 0", ErrInvalid, rttNames[i], d)
		}
		if i > 0 && rtt[i-1] > d {
			return fmt.Errorf("%w: rollup %s %v is above %s %v", ErrInvalid, rttNames[i-1], rtt[i-1], rttNames[i], d)
		}
	}
	return nil
}

// component is one period (or an earlier rollup point) as the quantile
// estimate sees it: its answered probes' weight and round trips in ticks.
type component struct {
	w float64
	q [4]uint64 // min, median, p90, max
}

// cdfLevels are the cumulative shares at a component's min, median, p90
// and max.
var cdfLevels = [4]float64{0, 0.5, 0.9, 1}

// event is where the mixture's CDF changes slope (ds, in weight per
// tick) or jumps (weight) at tick x.
type event struct {
	x        uint64
	ds, jump float64
}

// quantiles estimates the median and p90 of the mixture of comps: each
// component's distribution is taken as piecewise linear through its
// (min, 0), (median, 0.5), (p90, 0.9), (max, 1) (a point mass where two
// of them coincide), weighted by w, and the mixture's CDF is inverted
// exactly at 0.5 and 0.9. ev, keys and tmp are scratch space. The result
// is a deterministic function of comps (in their order).
func (f *Folder) quantiles(comps []component) (median, p90 uint64) {
	ev := f.ev[:0]
	total := 0.0
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for ci := range comps {
		c := &comps[ci]
		if c.w <= 0 {
			continue
		}
		total += c.w
		lo, hi = min(lo, c.q[0]), max(hi, c.q[3])
		var e [4]event
		for j := 0; j < 4; j++ {
			e[j].x = c.q[j]
		}
		for j := 0; j < 3; j++ {
			m := c.w * (cdfLevels[j+1] - cdfLevels[j])
			if d := c.q[j+1] - c.q[j]; d > 0 {
				sl := m / float64(d)
				e[j].ds += sl
				e[j+1].ds -= sl
			} else {
				e[j].jump += m
			}
		}
		ev = append(ev, e[:]...)
	}
	f.ev = ev
	if total == 0 || len(ev) == 0 {
		return 0, 0
	}
	keys := f.sortEvents(ev, lo, hi)
	ib := uint(bits.Len(uint(len(ev))))
	mask := uint64(1)<<ib - 1
	targets := [2]float64{0.5 * total, 0.9 * total}
	var out [2]uint64
	qi := 0
	g, slope, x := 0.0, 0.0, ev[keys[0]&mask].x
	for i := 0; i < len(keys) && qi < len(targets); {
		nx := ev[keys[i]&mask].x
		if slope > 0 {
			next := g + slope*float64(nx-x)
			for qi < len(targets) && next >= targets[qi] {
				off := math.Round((targets[qi] - g) / slope)
				out[qi] = x + min(uint64(max(off, 0)), nx-x)
				qi++
			}
			g = next
		}
		x = nx
		for ; i < len(keys); i++ {
			e := &ev[keys[i]&mask]
			if e.x != nx {
				break
			}
			slope += e.ds
			g += e.jump
		}
		for qi < len(targets) && g >= targets[qi] {
			out[qi] = nx
			qi++
		}
	}
	for ; qi < len(targets); qi++ { // rounding left the sum short of it
		out[qi] = hi
	}
	return out[0], out[1]
}

// sortEvents returns the sort keys of ev in (tick, index) order: each is
// (x - lo) above the event's index, radix-sorted a byte at a time over
// the bytes the keys use (about 3 for an hour of a LAN path: several
// times faster than a comparison sort). Keys that would not fit in 64
// bits (never, with MaxRTT and a bucket's periods) take a stable sort.
func (f *Folder) sortEvents(ev []event, lo, hi uint64) []uint64 {
	ib := uint(bits.Len(uint(len(ev))))
	nb := uint(bits.Len64(hi-lo)) + ib
	keys, tmp := f.keys[:0], f.tmp[:0]
	defer func() { f.keys, f.tmp = keys, tmp }()
	if nb > 64 {
		idx := make([]int, len(ev))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ev[a].x, ev[b].x) })
		for _, i := range idx {
			keys = append(keys, uint64(i))
		}
		return keys
	}
	for i := range ev {
		keys = append(keys, (ev[i].x-lo)<<ib|uint64(i))
	}
	tmp = slices.Grow(tmp, len(keys))[:len(keys)]
	var count [257]int
	for shift := uint(0); shift < nb; shift += 8 {
		clear(count[:])
		for _, k := range keys {
			count[int(byte(k>>shift))+1]++
		}
		for d := 1; d < len(count); d++ {
			count[d] += count[d-1]
		}
		for _, k := range keys {
			d := byte(k >> shift)
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// Folder folds samples into rollup points; it reuses its scratch space,
// so one Folder serves many calls. The zero value is ready; it is not
// safe for concurrent use.
type Folder struct {
	comps     []component
	ev        []event
	keys, tmp []uint64
}

// Fold is the rollup point of samples, which must be valid, share one
// RollupBucket (that of samples[0].Start) and be in Start order; nil or
// empty samples give false. Sent, Received, Periods, Failed, RTTMin and
// RTTMax are exact. RTTMedian and RTTP90 are the median and p90 of the
// mixture of the periods' round-trip distributions, each weighted by its
// answered probes and taken as piecewise linear through its min, median,
// p90 and max (see quantiles): unlike the median of the periods'
// medians, this follows a bucket whose latency changed part way through
// (a tenth of the periods slow moves the p90, not the median) and gives
// a period of 1 answer a tenth of the weight of one of 10. LastStatus is
// that of the last failed sample.
func (f *Folder) Fold(samples []Sample) (Rollup, bool) {
	if len(samples) == 0 {
		return Rollup{}, false
	}
	r := Rollup{Start: BucketOf(samples[0].Start), LastStatus: measurev1.Status_STATUS_OK}
	f.comps = f.comps[:0]
	first := true
	for i := range samples {
		s := &samples[i]
		r.Periods++
		r.Sent += uint64(s.Sent)
		r.Received += uint64(s.Received)
		if s.Status != measurev1.Status_STATUS_OK {
			r.Failed++
			r.LastStatus = s.Status
		}
		if s.Received == 0 {
			continue
		}
		c := component{w: float64(s.Received), q: [4]uint64{Ticks(s.RTTMin), Ticks(s.RTTMedian), Ticks(s.RTTP90), Ticks(s.RTTMax)}}
		f.comps = append(f.comps, c)
		if first || s.RTTMin < r.RTTMin {
			r.RTTMin = s.RTTMin
		}
		if first || s.RTTMax > r.RTTMax {
			r.RTTMax = s.RTTMax
		}
		first = false
	}
	f.finish(&r)
	return r, true
}

// finish sets r's median and p90 from f.comps, within r's min and max.
func (f *Folder) finish(r *Rollup) {
	if len(f.comps) == 0 {
		return
	}
	r.RTTMin, r.RTTMax = FromTicks(Ticks(r.RTTMin)), FromTicks(Ticks(r.RTTMax))
	var md, p90 uint64
	md, p90 = f.quantiles(f.comps)
	lo, hi := Ticks(r.RTTMin), Ticks(r.RTTMax)
	md, p90 = min(max(md, lo), hi), min(max(p90, lo), hi)
	r.RTTMedian, r.RTTP90 = FromTicks(md), FromTicks(max(md, p90))
}

// FoldChunk appends to dst the rollup points of samples (valid, in Start
// order, e.g. one decoded chunk), one per RollupBucket that holds any.
func (f *Folder) FoldChunk(dst []Rollup, samples []Sample) []Rollup {
	for i := 0; i < len(samples); {
		b := BucketOf(samples[i].Start)
		j := i + 1
		for j < len(samples) && BucketOf(samples[j].Start).Equal(b) {
			j++
		}
		r, _ := f.Fold(samples[i:j])
		dst = append(dst, r)
		i = j
	}
	return dst
}

// Merge is the point of a bucket that has point a and then receives the
// samples folded as b (a report that arrived after a had been rolled
// up): counts add up, min and max are the extremes, and the median and
// p90 are those of the mixture of a and b as two components weighted by
// their answered probes; LastStatus is b's if b failed, else a's. Both
// must be of the same bucket.
func (f *Folder) Merge(a, b Rollup) Rollup {
	r := Rollup{Start: a.Start, Periods: a.Periods + b.Periods, Sent: a.Sent + b.Sent, Received: a.Received + b.Received,
		Failed: a.Failed + b.Failed, LastStatus: a.LastStatus}
	if b.Failed > 0 {
		r.LastStatus = b.LastStatus
	}
	f.comps = f.comps[:0]
	for _, x := range []Rollup{a, b} {
		if x.Received == 0 {
			continue
		}
		if len(f.comps) == 0 || x.RTTMin < r.RTTMin {
			r.RTTMin = x.RTTMin
		}
		if len(f.comps) == 0 || x.RTTMax > r.RTTMax {
			r.RTTMax = x.RTTMax
		}
		f.comps = append(f.comps, component{w: float64(x.Received),
			q: [4]uint64{Ticks(x.RTTMin), Ticks(x.RTTMedian), Ticks(x.RTTP90), Ticks(x.RTTMax)}})
	}
	f.finish(&r)
	return r
}

// MergePoints is old (a decoded rollup chunk: sorted, distinct Starts)
// with the points add (sorted) merged in: a bucket in both is Merge(old,
// add). The result is sorted with distinct Starts; it may share old's
// backing array.
func (f *Folder) MergePoints(old, add []Rollup) []Rollup {
	if len(old) == 0 {
		return add
	}
	if len(add) > 0 && old[len(old)-1].Start.Before(add[0].Start) {
		return append(old, add...)
	}
	out := make([]Rollup, 0, len(old)+len(add))
	i, j := 0, 0
	for i < len(old) || j < len(add) {
		switch {
		case j == len(add) || i < len(old) && old[i].Start.Before(add[j].Start):
			out = append(out, old[i])
			i++
		case i == len(old) || add[j].Start.Before(old[i].Start):
			out = append(out, add[j])
			j++
		default:
			out = append(out, f.Merge(old[i], add[j]))
			i, j = i+1, j+1
		}
	}
	return out
}
