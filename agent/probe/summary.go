package probe

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/stats"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// maxSamples bounds the round trips a series keeps per period; min and
// max stay exact beyond it, median and p90 are over the first maxSamples.
const maxSamples = 512

// result is one finished probe.
type result struct {
	key    seriesKey
	due    time.Time // wall clock: the period it belongs to
	at     time.Time // wall clock: when it finished (zero: when recorded)
	rtt    time.Duration
	status measurev1.Status // STATUS_OK: answered
	msg    string
}

// series accumulates one series over a period.
type series struct {
	sent, received uint32
	min, max       time.Duration
	rtts           []float64        // seconds, the first maxSamples
	status         measurev1.Status // last failure's, or STATUS_OK
	msg            string
}

func (s *series) add(r result) {
	s.sent++
	if r.status != measurev1.Status_STATUS_OK {
		s.status, s.msg = r.status, r.msg
		return
	}
	if s.received == 0 || r.rtt < s.min {
		s.min = r.rtt
	}
	if r.rtt > s.max {
		s.max = r.rtt
	}
	s.received++
	if len(s.rtts) < maxSamples {
		s.rtts = append(s.rtts, r.rtt.Seconds())
	}
}

// summary sums the series up: the median and p90 are the project's
// (stats.MedianSorted, stats.QuantileSorted: linear interpolation, the
// mean of the two middle round trips for an even count). It sorts s.rtts
// in place.
func (s *series) summary(k seriesKey) *agentv1.ProbeSummary {
	out := &agentv1.ProbeSummary{
		Dst:      &agentv1.ProbeSummary_Node{Node: k.peer},
		Path:     k.path,
		Kind:     k.kind,
		IpFamily: k.fam,
		Sent:     s.sent,
		Received: s.received,
		Status:   measurev1.Status_STATUS_OK,
	}
	if s.received > 0 {
		slices.Sort(s.rtts)
		out.RttMinSeconds = s.min.Seconds()
		out.RttMedianSeconds = stats.MedianSorted(s.rtts)
		out.RttP90Seconds = stats.QuantileSorted(s.rtts, 0.9)
		out.RttMaxSeconds = s.max.Seconds()
	}
	if s.received < s.sent {
		out.Status = s.status
		out.Message = cleanMessage(s.msg)
	}
	return out
}

// cleanMessage makes words fit a summary: printable runes only (others
// become '?'), at most safetext.MaxProbeMessageBytes bytes, cut on a rune boundary.
func cleanMessage(m string) string {
	var b strings.Builder
	for _, r := range m {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > safetext.MaxProbeMessageBytes {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// period is one report period being accumulated.
type period struct {
	start, end time.Time // end may move earlier (a new failure)
	series     map[seriesKey]*series
	skipped    uint64
	inflight   int // probes due in the period not finished yet
	early      bool

	// The series and their round trips are carved from chunks (newSeries)
	// rather than allocated one by one: a period holds one series per
	// probe target, each with a few round trips.
	slab []series
	rtts []float64
}

// seriesChunk is how many series newSeries allocates at once.
const seriesChunk = 256

// newSeries returns a new series with room for samples round trips.
func (p *period) newSeries(samples int) *series {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]series, 0, seriesChunk)
	}
	p.slab = append(p.slab, series{})
	s := &p.slab[len(p.slab)-1]
	if n := len(p.rtts); cap(p.rtts)-n >= samples {
		s.rtts = p.rtts[n : n : n+samples] // appends past samples reallocate this series' own
		p.rtts = p.rtts[:n+samples]
	} else {
		p.rtts = make([]float64, samples, seriesChunk*samples)
		s.rtts = p.rtts[0:0:samples]
	}
	return s
}

// ledger owns the open periods (at most two: one waiting for its last
// probes, one current) and each series' failure in the last period.
type ledger struct {
	interval, reportInterval time.Duration
	open                     []*period
	failedLast               map[seriesKey]bool
	lastEnd                  time.Time // end of the last period reported
	floor                    time.Time // no period starts before it (probing began, settings changed)
	lastSeries               int       // series in the last period reported: the next one's map size
}

// newLedger returns a ledger whose first period starts at start at the
// earliest (the first period is the rest of the aligned period).
func newLedger(interval, reportInterval time.Duration, start time.Time) *ledger {
	return &ledger{interval: interval, reportInterval: reportInterval, failedLast: map[seriesKey]bool{}, floor: start}
}

// periodFor returns the open period a probe due at t belongs to, opening
// a new current period when t is past the current one's end.
func (l *ledger) periodFor(t time.Time) *period {
	for _, p := range l.open {
		if !t.Before(p.start) && t.Before(p.end) {
			return p
		}
	}
	n := len(l.open)
	if n > 0 && t.Before(l.open[n-1].end) {
		return l.open[n-1] // before every open period: the clock went back
	}
	start := t.Truncate(l.reportInterval)
	if n > 0 && l.open[n-1].end.After(start) {
		start = l.open[n-1].end // after an early end: the rest of the period
	}
	if l.lastEnd.After(start) {
		start = l.lastEnd
	}
	if l.floor.After(start) {
		start = l.floor
	}
	p := &period{start: start, end: t.Truncate(l.reportInterval).Add(l.reportInterval), series: make(map[seriesKey]*series, l.lastSeries)}
	l.open = append(l.open, p)
	return p
}

// clamp moves t past the periods already reported.
func (l *ledger) clamp(t time.Time) time.Time {
	if t.Before(l.lastEnd) {
		return l.lastEnd
	}
	return t
}

// started counts a probe due at t as in flight.
func (l *ledger) started(t time.Time) { l.periodFor(l.clamp(t)).inflight++ }

// skip counts a probe due at t as skipped.
func (l *ledger) skip(t time.Time) { l.periodFor(l.clamp(t)).skipped++ }

// record adds a finished probe, received at now. A failure in a series
// that had none in the last period nor so far in this one ends this
// period at the end of the probe interval holding now (so that every
// probe already recorded stays inside it).
//
// A result of a period already reported (given up after the grace) is
// dropped.
func (l *ledger) record(r result, now time.Time) {
	if r.due.Before(l.lastEnd) {
		return
	}
	p := l.periodFor(r.due)
	p.inflight--
	s := p.series[r.key]
	if s == nil {
		s = p.newSeries(l.samples())
		p.series[r.key] = s
	}
	fresh := s.received == s.sent && !l.failedLast[r.key]
	s.add(r)
	if r.status != measurev1.Status_STATUS_OK && fresh {
		end := now.Truncate(l.interval).Add(l.interval)
		if end.Before(p.end) {
			p.end, p.early = end, true
			// A later open period cannot exist yet: now < end <= p.end-interval,
			// and a probe starts at most startSlack (under an interval) early.
		}
	}
}

// samples is how many round trips a series holds in a whole period.
func (l *ledger) samples() int {
	if l.interval <= 0 {
		return 1
	}
	return int(min(max(l.reportInterval/l.interval, 1), maxSamples))
}

// closeAt ends every open period at now at the latest (settings change,
// stop); later periods start at now at the earliest.
func (l *ledger) closeAt(now time.Time) {
	l.floor = now
	for _, p := range l.open {
		if p.end.After(now) {
			p.end = now
		}
	}
}

// due returns the periods that are over: past their end with no probe in
// flight, or past their end plus grace. It removes them from the ledger
// and remembers their failures.
func (l *ledger) due(now time.Time, grace time.Duration) []*period {
	var out []*period
	for len(l.open) > 0 {
		p := l.open[0]
		if now.Before(p.end) || p.inflight > 0 && now.Before(p.end.Add(grace)) {
			break
		}
		l.open = l.open[1:]
		l.lastEnd = p.end
		l.lastSeries = len(p.series)
		clear(l.failedLast)
		for k, s := range p.series {
			if s.received < s.sent {
				l.failedLast[k] = true
			}
		}
		out = append(out, p)
	}
	return out
}

// waiting reports whether the oldest open period is over at now but for
// probes in flight.
func (l *ledger) waiting(now time.Time) bool {
	return len(l.open) > 0 && !now.Before(l.open[0].end) && l.open[0].inflight > 0
}

// nextDeadline is when the oldest open period may be due (zero: none).
func (l *ledger) nextDeadline() time.Time {
	if len(l.open) == 0 {
		return time.Time{}
	}
	return l.open[0].end
}

// report builds the ProbeReport of a period.
func (p *period) report(seq, version uint64) *agentv1.ProbeReport {
	keys := make([]seriesKey, 0, len(p.series))
	for k := range p.series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b seriesKey) int {
		if c := strings.Compare(a.peer, b.peer); c != 0 {
			return c
		}
		if a.path != b.path {
			return int(a.path - b.path)
		}
		if a.kind != b.kind {
			return int(a.kind - b.kind)
		}
		return int(a.fam - b.fam)
	})
	r := &agentv1.ProbeReport{
		Seq:         seq,
		PeriodStart: timestamppb.New(p.start),
		Period:      durationpb.New(p.end.Sub(p.start)),
		PlanVersion: version,
		Skipped:     p.skipped,
		Summaries:   make([]*agentv1.ProbeSummary, 0, len(keys)),
	}
	for _, k := range keys {
		r.Summaries = append(r.Summaries, p.series[k].summary(k))
	}
	return r
}
