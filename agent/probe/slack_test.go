package probe

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// slackBase is a multiple of 10 s: the wheels' cycle starts there.
var slackBase = time.Unix(1_700_000_000, 0)

// loopback is where slackLoop's probes go (none leaves: every start fails).
var loopback = netip.MustParseAddr("127.0.0.1")

// slackLoop is a loop over ts (phase-sorted) at a 10 s interval with
// room for every probe, no TCP prober and pingers without sockets: each
// start fails at once, so its result is in the ledger when step returns.
func slackLoop(t *testing.T, ts []target, maxPPS int) *loop {
	t.Helper()
	var r reports
	p := loopbackProber(t, &r)
	interval := 10 * time.Second
	l := &loop{p: p, set: &settings{interval: interval, reportInterval: interval, timeout: time.Second,
		maxInFlight: 100, maxPPS: maxPPS}, tcpErr: errors.New("no TCP here"), box: newMailbox(p.now)}
	l.ledger = newLedger(interval, interval, slackBase)
	l.bucket = newBucket(maxPPS, slackBase)
	pg := &pinger{waiting: map[uint16]*waiter{}, openErr: errors.New("no ICMP here")} // every send fails at once
	l.pingers = [2]*pinger{pg, pg}
	exact, slack := splitTargets(ts)
	l.wheels[wheelExact].reset(exact, interval, slackBase)
	l.wheels[wheelSlack].reset(slack, interval, slackBase)
	return l
}

// started returns the probes of l's open periods (each failed at once),
// by peer.
func started(l *loop) map[string]bool {
	out := map[string]bool{}
	for _, per := range l.ledger.open {
		for k, s := range per.series {
			if s.sent > 0 {
				out[k.peer] = true
			}
		}
	}
	return out
}

// TestStartSlack: one step starts every ICMP probe due by now and every
// TCP probe due within startSlack of now (sharing the wakeup), and leaves
// the later ones for the next wake, which is the first of them.
func TestStartSlack(t *testing.T) {
	ms := time.Millisecond
	icmp, tcp := measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP
	type probe struct {
		peer  string
		kind  measurev1.ProbeKind
		phase time.Duration
	}
	cases := []struct {
		name   string
		probes []probe
		at     time.Duration // the step's now, from slackBase
		want   []string      // the peers started
		next   time.Duration // the next wake, from slackBase
	}{
		{"TCP within the slack", []probe{{"a", tcp, 0}, {"b", tcp, 3 * ms}, {"c", tcp, 24 * ms}, {"d", tcp, 26 * ms}}, 0,
			[]string{"a", "b", "c"}, 26 * ms},
		{"the slack's edge starts", []probe{{"a", tcp, 0}, {"b", tcp, 25 * ms}, {"c", tcp, 25*ms + 1}}, 0,
			[]string{"a", "b"}, 25*ms + 1},
		{"ICMP only when due", []probe{{"a", icmp, 0}, {"b", icmp, 1 * ms}, {"c", tcp, 2 * ms}}, 0,
			[]string{"a", "c"}, 1 * ms},
		{"TCP joins an ICMP wakeup", []probe{{"a", icmp, 10 * ms}, {"b", tcp, 12 * ms}, {"c", icmp, 20 * ms}, {"d", tcp, 30 * ms}}, 10 * ms,
			[]string{"a", "b", "d"}, 20 * ms},
		{"nothing due yet", []probe{{"a", tcp, 30 * ms}, {"b", icmp, 35 * ms}}, 0, nil, 30 * ms},
		{"late and early together", []probe{{"a", tcp, 1 * ms}, {"b", icmp, 2 * ms}, {"c", tcp, 29 * ms}, {"d", tcp, 31 * ms}}, 5 * ms,
			[]string{"a", "b", "c"}, 31 * ms},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := make([]target, len(c.probes))
			for i, p := range c.probes {
				ts[i] = target{key: seriesKey{peer: p.peer, path: measurev1.Path_PATH_HOST_TO_HOST, kind: p.kind},
					dst: loopback, phase: p.phase}
			}
			l := slackLoop(t, ts, 1000)
			now := slackBase.Add(c.at)
			l.step(now)
			got := started(l)
			for _, p := range c.want {
				if !got[p] {
					t.Errorf("probe %s not started at %v", p, c.at)
				}
				delete(got, p)
			}
			for p := range got {
				t.Errorf("probe %s started at %v, before its time", p, c.at)
			}
			if w := l.wake(now); w != slackBase.Add(c.next) {
				t.Errorf("next wake %v, want %v", w.Sub(slackBase), c.next)
			}
		})
	}
}

// TestStartSlackBounds: the slack is a 400th of the interval, at most
// 25 ms, and always under an interval (the ledger's early end relies on
// it).
func TestStartSlackBounds(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{time.Second, 2500 * time.Microsecond},
		{4 * time.Second, 10 * time.Millisecond},
		{10 * time.Second, 25 * time.Millisecond},
		{time.Hour, 25 * time.Millisecond},
		{100 * time.Millisecond, 250 * time.Microsecond},
	} {
		if got := startSlack(c.interval); got != c.want || got >= c.interval {
			t.Errorf("startSlack(%v) = %v, want %v", c.interval, got, c.want)
		}
	}
}

// TestStartSlackBudget: a probe started early is charged to the packet
// budget at its due time, so the slack does not make probes within the
// rate look like a burst above it.
func TestStartSlackBudget(t *testing.T) {
	ts := []target{
		{key: seriesKey{peer: "a", kind: measurev1.ProbeKind_PROBE_KIND_TCP}, phase: 0},
		{key: seriesKey{peer: "b", kind: measurev1.ProbeKind_PROBE_KIND_TCP}, phase: 25 * time.Millisecond},
	}
	l := slackLoop(t, ts, 40)
	l.bucket.tokens = 1 // one probe's worth now; the next 25 ms (at 40/s) earn another
	l.step(slackBase)
	var skipped uint64
	for _, per := range l.ledger.open {
		skipped += per.skipped
	}
	if got := started(l); len(got) != 2 || skipped != 0 {
		t.Errorf("two probes 25 ms apart at 40/s: started %v, %d skipped; want both and none", got, skipped)
	}
}
