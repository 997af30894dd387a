package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const ms = time.Millisecond

// TestSummary: the period's figures (median and p90 interpolated, as
// stats computes every median and quantile), status and message.
func TestSummary(t *testing.T) {
	ok := func(d time.Duration) result { return result{rtt: d, status: measurev1.Status_STATUS_OK} }
	fail := func(st measurev1.Status, m string) result { return result{status: st, msg: m} }
	tests := []struct {
		name                  string
		in                    []result
		sent, received        uint32
		min, median, p90, max time.Duration
		status                measurev1.Status
		msg                   string
	}{
		{name: "one", in: []result{ok(3 * ms)}, sent: 1, received: 1, min: 3 * ms, median: 3 * ms, p90: 3 * ms, max: 3 * ms, status: measurev1.Status_STATUS_OK},
		// p90 of 1..4 ms: rank 0.9 x 3 = 2.7, 3 ms + 0.7 x 1 ms.
		{name: "even count: mean of the middle two", in: []result{ok(4 * ms), ok(1 * ms), ok(3 * ms), ok(2 * ms)}, sent: 4, received: 4,
			min: 1 * ms, median: 2500 * time.Microsecond, p90: 3700 * time.Microsecond, max: 4 * ms, status: measurev1.Status_STATUS_OK},
		{name: "ten", in: []result{ok(10 * ms), ok(9 * ms), ok(8 * ms), ok(7 * ms), ok(6 * ms), ok(5 * ms), ok(4 * ms), ok(3 * ms), ok(2 * ms), ok(1 * ms)},
			// p90 of 1..10 ms: rank 0.9 x 9 = 8.1, 9 ms + 0.1 x 1 ms.
			sent: 10, received: 10, min: 1 * ms, median: 5500 * time.Microsecond, p90: 9100 * time.Microsecond, max: 10 * ms, status: measurev1.Status_STATUS_OK},
		{name: "loss then refusal: last failure", in: []result{ok(2 * ms), fail(measurev1.Status_STATUS_TIMEOUT, "lost"), fail(measurev1.Status_STATUS_REFUSED, "refused"), ok(4 * ms)},
			sent: 4, received: 2, min: 2 * ms, median: 3 * ms, p90: 3800 * time.Microsecond, max: 4 * ms, status: measurev1.Status_STATUS_REFUSED, msg: "refused"},
		{name: "all lost", in: []result{fail(measurev1.Status_STATUS_TIMEOUT, "no reply\x00\n")}, sent: 1, status: measurev1.Status_STATUS_TIMEOUT, msg: "no reply??"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s series
			for _, r := range tt.in {
				s.add(r)
			}
			k := seriesKey{"b", measurev1.Path_PATH_HOST_TO_POD, measurev1.ProbeKind_PROBE_KIND_TCP, 0}
			got := s.summary(k)
			if got.GetNode() != "b" || got.Path != k.path || got.Kind != k.kind {
				t.Errorf("dst %v %v %v", got.GetNode(), got.Path, got.Kind)
			}
			if got.Sent != tt.sent || got.Received != tt.received {
				t.Errorf("sent %d received %d, want %d %d", got.Sent, got.Received, tt.sent, tt.received)
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"min", got.RttMinSeconds, tt.min.Seconds()}, {"median", got.RttMedianSeconds, tt.median.Seconds()},
				{"p90", got.RttP90Seconds, tt.p90.Seconds()}, {"max", got.RttMaxSeconds, tt.max.Seconds()}} {
				if !testutil.Near(f.got, f.want, 1e-12) {
					t.Errorf("%s %v s, want %v s", f.name, f.got, f.want)
				}
			}
			if got.Status != tt.status || got.Message != tt.msg {
				t.Errorf("status %v %q, want %v %q", got.Status, got.Message, tt.status, tt.msg)
			}
		})
	}
}

// TestSummaryBounded: samples beyond maxSamples are not kept, min and max
// stay exact.
func TestSummaryBounded(t *testing.T) {
	var s series
	for i := range 3 * maxSamples {
		s.add(result{rtt: time.Duration(i+1) * time.Microsecond, status: measurev1.Status_STATUS_OK})
	}
	if len(s.rtts) != maxSamples {
		t.Errorf("kept %d samples, want %d", len(s.rtts), maxSamples)
	}
	got := s.summary(seriesKey{})
	if got.Received != 3*maxSamples || got.RttMaxSeconds != (3*maxSamples*time.Microsecond).Seconds() || got.RttMinSeconds != time.Microsecond.Seconds() {
		t.Errorf("received %d min %v max %v", got.Received, got.RttMinSeconds, got.RttMaxSeconds)
	}
}

// TestCleanMessage: at most 256 bytes, printable, cut on a rune.
func TestCleanMessage(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	got := cleanMessage(long)
	if len(got) > safetext.MaxProbeMessageBytes || len(got) != 256 || !strings.HasPrefix(long, got) {
		t.Errorf("cleanMessage of 400 bytes: %d bytes", len(got))
	}
	if got := cleanMessage("a\tb\xffc\u200bd"); got != "a?b?c?d" {
		t.Errorf("cleanMessage = %q", got)
	}
}

// TestLedgerPeriods: periods are aligned to report_interval; a new
// failure ends the period at the end of its probe interval; a failure
// continuing from the last period does not; a period waits for its
// probes in flight, up to the grace.
func TestLedgerPeriods(t *testing.T) {
	base := time.Unix(1_700_000_000, 0) // a multiple of 10 s
	at := base.Add
	k := seriesKey{"b", measurev1.Path_PATH_HOST_TO_HOST, measurev1.ProbeKind_PROBE_KIND_ICMP, 0}
	ok := func(due time.Duration) result {
		return result{key: k, due: at(due), rtt: ms, status: measurev1.Status_STATUS_OK}
	}
	lost := func(due time.Duration) result {
		return result{key: k, due: at(due), status: measurev1.Status_STATUS_TIMEOUT, msg: "lost"}
	}
	l := newLedger(time.Second, 10*time.Second, base)
	grace := 2 * time.Second
	probe := func(r result, done time.Duration) {
		l.started(r.due)
		l.record(r, at(done))
	}
	report := func(now time.Duration) []*agentv1.ProbeReport {
		var out []*agentv1.ProbeReport
		for _, p := range l.due(at(now), grace) {
			out = append(out, p.report(1, 1))
		}
		return out
	}

	// Period [0, 10 s): clean.
	for i := range 10 {
		d := time.Duration(i)*time.Second + 300*ms
		probe(ok(d), d+ms)
	}
	if r := report(9 * time.Second); len(r) != 0 {
		t.Fatalf("a report before the period's end: %v", r)
	}
	r := report(10 * time.Second)
	if len(r) != 1 || r[0].Period.AsDuration() != 10*time.Second || !r[0].PeriodStart.AsTime().Equal(base) || r[0].Summaries[0].Sent != 10 {
		t.Fatalf("first period: %v", r)
	}

	// Period from 10 s: a loss at 12.3 s (noticed at 12.8 s) ends it at 13 s.
	probe(ok(10*time.Second+300*ms), 10*time.Second+301*ms)
	probe(ok(11*time.Second+300*ms), 11*time.Second+301*ms)
	probe(lost(12*time.Second+300*ms), 12*time.Second+800*ms)
	if r := report(12*time.Second + 900*ms); len(r) != 0 {
		t.Fatalf("a report before the early end: %v", r)
	}
	r = report(13 * time.Second)
	if len(r) != 1 || r[0].Period.AsDuration() != 3*time.Second || r[0].Summaries[0].Status != measurev1.Status_STATUS_TIMEOUT {
		t.Fatalf("early period: %v", r)
	}

	// The rest of the aligned period, [13 s, 20 s): the loss continues,
	// which does not end it early again.
	probe(lost(13*time.Second+300*ms), 13*time.Second+800*ms)
	probe(ok(14*time.Second+300*ms), 14*time.Second+301*ms)
	// A probe due at 19.9 s still in flight at 20 s holds the period.
	l.started(at(19*time.Second + 900*ms))
	if r := report(20 * time.Second); len(r) != 0 {
		t.Fatalf("reported with a probe in flight: %v", r)
	}
	l.record(ok(19*time.Second+900*ms), at(20*time.Second+100*ms))
	r = report(20*time.Second + 100*ms)
	if len(r) != 1 || r[0].Period.AsDuration() != 7*time.Second || !r[0].PeriodStart.AsTime().Equal(at(13*time.Second)) ||
		r[0].Summaries[0].Sent != 3 || r[0].Summaries[0].Received != 2 {
		t.Fatalf("rest of the period: %v", r)
	}

	// [20 s, 30 s): a loss after a period that had one: no early end;
	// a probe that never reports is given up after the grace.
	probe(lost(21*time.Second+300*ms), 21*time.Second+800*ms)
	l.skip(at(22 * time.Second))
	l.started(at(29 * time.Second))
	if r := report(31 * time.Second); len(r) != 0 {
		t.Fatalf("reported within the grace: %v", r)
	}
	r = report(32 * time.Second)
	if len(r) != 1 || r[0].Period.AsDuration() != 10*time.Second || r[0].Skipped != 1 {
		t.Fatalf("period with a continuing loss: %v", r)
	}
	// A partial first period after a ledger starts mid-period.
	l2 := newLedger(time.Second, 10*time.Second, at(4*time.Second))
	l2.started(at(5 * time.Second))
	if p := l2.open[0]; !p.start.Equal(at(4*time.Second)) || !p.end.Equal(at(10*time.Second)) {
		t.Errorf("first period [%v, %v), want [4 s, 10 s)", p.start.Sub(base), p.end.Sub(base))
	}

	// [30 s, 40 s): a loss right after a failed period does not end it.
	probe(lost(35*time.Second+100*ms), 35*time.Second+600*ms)
	if r := report(36 * time.Second); len(r) != 0 {
		t.Fatalf("a loss following a failed period ended the period: %v", r)
	}
	// The probe given up at 32 s reports late: dropped, not counted.
	l.record(ok(29*time.Second), at(36*time.Second))
	r = report(40 * time.Second)
	if len(r) != 1 || r[0].Summaries[0].Sent != 1 || !r[0].PeriodStart.AsTime().Equal(at(30*time.Second)) {
		t.Fatalf("period after the grace: %v", r)
	}
}
