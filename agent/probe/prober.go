package probe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Run probes the held plan (and each plan Apply gives it) until ctx ends,
// calling Config.Report at each period's end. It opens one pair of raw
// ICMP sockets per network first (and a pair of ICMPv6 ones on each
// network with an IPv6 address); if they cannot be opened (no
// CAP_NET_RAW) it logs it once and every ICMP probe fails with those
// words, the other kinds still run. It returns nil once ctx has ended and
// every goroutine it started has stopped (the open periods are dropped,
// not reported), or an error at once if Run is already running or its
// timerfd (the loop's clock: see alarm) cannot be opened.
func (p *Prober) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("probe: Run is already running")
	}
	p.running = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()

	al, err := newAlarm()
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer al.close() // last: after everything that rings it has stopped
	var bell sync.WaitGroup
	stopBell := make(chan struct{})
	bell.Go(func() { // a new plan or the end of ctx wakes the loop
		for {
			select {
			case <-p.changed:
				al.ring()
			case <-ctx.Done():
				al.ring()
				return
			case <-stopBell:
				return
			}
		}
	})
	defer func() {
		close(stopBell)
		bell.Wait()
	}()

	l := &loop{p: p, nets: []*Network{&p.cfg.Host, p.cfg.Pod}, box: newMailbox(p.now)}
	l.box.ring = al.ring
	tp, err := newTCPProber(l.box)
	if err != nil {
		p.log.Warn("TCP probes will fail", "err", err)
		l.tcpErr = err
	}
	l.tcp = tp
	var cancel context.CancelFunc
	l.ctx, cancel = context.WithCancel(ctx)
	var readers sync.WaitGroup
	if tp != nil {
		readers.Go(tp.wait)
	}
	for i, n := range l.nets {
		if n == nil {
			continue
		}
		pg := openPinger(n, false)
		if pg.openErr != nil {
			p.log.Warn("ICMP probes will fail", "network", n.Net, "err", pg.openErr)
		}
		l.pingers[i] = pg
		readers.Go(func() { pg.read(p.log, l.box) })
		l.dialers[i] = dialer{ns: n.NetNS, src: n.IP}
		if n.NetNS != "" {
			l.dialers[i].stock = newNSSockets(n.NetNS)
		}
		l.clients[i] = httpClient(l.dialers[i])
		if n.IPv6.IsValid() { // else no IPv6 target from n (targets)
			pg6 := openPinger(n, true)
			if pg6.openErr != nil {
				p.log.Warn("ICMPv6 probes will fail", "network", n.Net, "err", pg6.openErr)
			}
			l.pingers6[i] = pg6
			readers.Go(func() { pg6.read(p.log, l.box) })
			l.dialers6[i] = dialer{ns: n.NetNS, src: n.IPv6, stock: l.dialers[i].stock}
			l.clients6[i] = httpClient(l.dialers6[i])
		}
	}
	defer func() { // after the probes have stopped (defers run last first)
		for _, pg := range append(l.pingers[:], l.pingers6[:]...) {
			if pg != nil {
				pg.close()
			}
		}
		if tp != nil {
			tp.stop()
		}
		readers.Wait()
		for _, c := range append(l.clients[:], l.clients6[:]...) {
			if c != nil {
				c.CloseIdleConnections()
			}
		}
		for _, d := range l.dialers {
			d.stock.close()
		}
	}()
	defer func() {
		cancel()
		l.probes.Wait()
	}()

	var rs []result
	for {
		if ctx.Err() != nil {
			return nil
		}
		l.rebuild(p.now()) // nothing to do unless Apply gave a new plan
		rs = l.box.take(rs[:0])
		for _, r := range rs {
			l.finish(r)
		}
		now := p.now()
		l.step(now)
		if l.ledger != nil && l.ledger.waiting(now) {
			// A period is over but for probes in flight: their results
			// end it, so they wake the loop. Otherwise results wait for
			// the next step (at most a probe interval's fraction away).
			l.box.eager.Store(true)
			if l.box.pending() {
				continue
			}
		}
		al.set(l.sleep(now))
		if err := al.wait(); err != nil {
			return nil // not before the deferred close
		}
		l.box.eager.Store(false)
	}
}

// finish records a probe's result, finished at r.at (zero: now).
func (l *loop) finish(r result) {
	l.inflight--
	at := r.at
	if at.IsZero() {
		at = l.p.now()
	}
	l.ledger.record(r, at)
}

// loop is Run's state, owned by Run's goroutine.
type loop struct {
	p       *Prober
	nets    []*Network // [0] host, [1] pod (nil: none)
	pingers [2]*pinger
	dialers [2]dialer
	clients [2]*http.Client
	// pingers6, dialers6 and clients6 are the IPv6 counterparts, for the
	// networks with an IPv6 address (else nil and zero).
	pingers6 [2]*pinger
	dialers6 [2]dialer
	clients6 [2]*http.Client

	ctx    context.Context // the probes'
	probes sync.WaitGroup  // HTTP probes
	box    *mailbox        // results from the ICMP readers, the TCP prober and HTTP probes
	echoes expiries        // the ICMP echoes and TCP probes in flight
	tcp    *tcpProber      // nil: tcpErr
	tcpErr error

	plan     *plan
	set      *settings // nil: stopped
	targets  []target
	wheels   [2]wheel // [wheelExact] the ICMP probes, [wheelSlack] the TCP and HTTP ones
	bucket   bucket
	ledger   *ledger
	inflight int
	epoch    int64
	subset   map[string]bool // nil: every peer
}

// rebuild follows the held plan: new targets, and when the settings
// changed, new budgets and the open periods closed at now.
func (l *loop) rebuild(now time.Time) {
	pl := l.p.held()
	if pl == nil || pl == l.plan {
		return
	}
	l.plan = pl
	s := pl.settings
	if s == nil || l.set == nil || !proto.Equal(s.src, l.set.src) {
		if l.ledger != nil {
			l.ledger.closeAt(now)
		}
		if s != nil {
			if l.ledger == nil {
				l.ledger = newLedger(s.interval, s.reportInterval, now)
			}
			l.ledger.interval, l.ledger.reportInterval = s.interval, s.reportInterval
			l.bucket = newBucket(s.maxPPS, now)
		}
	}
	l.set = s
	l.targets = targets(l.p.cfg.Node, l.nets, pl)
	l.subset, l.epoch = nil, 0
	if s == nil {
		l.wheels = [2]wheel{}
		return
	}
	exact, slack := splitTargets(l.targets)
	l.wheels[wheelExact].reset(exact, s.interval, now)
	l.wheels[wheelSlack].reset(slack, s.interval, now)
	l.resubset(now)
	l.p.log.Info("probe plan", "version", pl.version, "peers", len(pl.peers), "probes", len(l.targets),
		"interval", s.interval, "report_interval", s.reportInterval)
}

// resubset picks the epoch's subset of peers (subset mode only).
func (l *loop) resubset(now time.Time) {
	if l.set == nil || l.set.subsetSize == 0 {
		return
	}
	e := now.UnixNano() / int64(l.set.subsetRotation)
	if e == l.epoch && l.subset != nil {
		return
	}
	l.epoch = e
	l.subset = subset(l.p.cfg.Node, l.plan.peers, l.set.subsetSize, e)
}

// step times out the echoes whose reply is overdue, starts the probes due
// by now (or counts them skipped) and reports the periods that are over.
// The ICMP probes go first, each at its own due time, so that an echo
// leaves a CPU in the state ping's would find it in; the TCP and HTTP
// probes due within startSlack join the wakeup.
func (l *loop) step(now time.Time) {
	l.expire(time.Now())
	if l.set != nil {
		l.resubset(now)
		l.startDue(&l.wheels[wheelExact], now, now)
		l.startDue(&l.wheels[wheelSlack], now, now.Add(startSlack(l.set.interval)))
	}
	if l.ledger == nil {
		return
	}
	grace := time.Second
	if l.set != nil {
		grace += l.set.timeout
	}
	for _, per := range l.ledger.due(now, grace) {
		l.p.cfg.Report(per.report(l.p.nextSeq(), l.plan.version))
	}
}

// startDue starts w's probes due by horizon (now or later), or counts
// them skipped.
func (l *loop) startDue(w *wheel, now, horizon time.Time) {
	for {
		t, due, ok := w.next()
		if !ok || due.After(horizon) {
			return
		}
		if now.Sub(due) > l.set.interval {
			// The clock jumped, or the loop stalled: resume from now
			// rather than firing a cycle's worth of probes at once.
			l.p.log.Warn("probe schedule behind; resuming from now", "behind", now.Sub(due))
			w.reset(w.targets, l.set.interval, now)
			continue
		}
		w.advance()
		if l.subset != nil && !l.subset[t.key.peer] {
			continue
		}
		// The budget counts a probe started early at its due time: the
		// slack bunches starts, not the rate.
		if l.inflight >= l.set.maxInFlight || !l.bucket.take(later(now, due)) {
			l.ledger.skip(due)
			continue
		}
		l.inflight++
		l.ledger.started(due)
		l.start(t, due)
	}
}

// sleep is how long the loop may wait for a result before step has
// something to do: the next probe, period end or timeout of a probe
// still in flight. The timeouts of probes that have ended are dropped
// first, from the earliest on: each would be a wakeup for nothing (most
// probes end long before their timeout).
func (l *loop) sleep(now time.Time) time.Duration {
	d := max(l.wake(now).Sub(now), time.Millisecond)
	for len(l.echoes) > 0 && l.ended(l.echoes[0]) {
		l.echoes.pop()
	}
	if at, ok := l.echoes.next(); ok {
		d = min(d, max(time.Until(at), 0))
	}
	return d
}

// wake is when step has something to do next.
func (l *loop) wake(now time.Time) time.Time {
	next := now.Add(time.Hour)
	for i := range l.wheels {
		if _, due, ok := l.wheels[i].next(); ok && l.set != nil && due.Before(next) {
			next = due
		}
	}
	if l.ledger != nil {
		if d := l.ledger.nextDeadline(); !d.IsZero() {
			if !now.Before(d) {
				d = d.Add(time.Second)
				if l.set != nil {
					d = d.Add(l.set.timeout)
				}
			}
			if d.Before(next) {
				next = d
			}
		}
	}
	if l.set != nil && l.set.subsetSize > 0 {
		r := l.set.subsetRotation
		if e := time.Unix(0, (now.UnixNano()/int64(r)+1)*int64(r)); e.Before(next) {
			next = e
		}
	}
	return next
}

// start starts one probe: an echo or a TCP probe from the loop itself
// (the ICMP reader or the TCP prober's wait, or else expire, gives the
// result), an HTTP probe in a goroutine of its own.
func (l *loop) start(t *target, due time.Time) {
	switch t.key.kind {
	case measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU:
		pg := l.pingers[t.net]
		if t.key.v6() {
			pg = l.pingers6[t.net]
		}
		seq, w, fail, ok := pg.send(t.key, due, t.dst, t.size, t.key.kind == measurev1.ProbeKind_PROBE_KIND_ICMP_MTU)
		if !ok {
			l.finish(fail)
			return
		}
		l.echoes.push(expiry{at: time.Now().Add(l.set.timeout), pg: pg, seq: seq, w: w})
	case measurev1.ProbeKind_PROBE_KIND_TCP:
		if l.tcp == nil {
			l.finish(result{key: t.key, due: due, status: measurev1.Status_STATUS_TOOL_ERROR, msg: l.tcpErr.Error()})
			return
		}
		d := l.dialers[t.net]
		if t.key.v6() {
			d = l.dialers6[t.net]
		}
		id, fail, ok := l.tcp.start(d, t.key, due, t.dst, t.port)
		if !ok {
			l.finish(fail)
			return
		}
		l.echoes.push(expiry{at: time.Now().Add(l.set.timeout), tcp: id})
	default:
		l.launch(*t, due)
	}
}

// ended reports whether e's probe has ended (its result given).
func (l *loop) ended(e expiry) bool {
	if e.pg != nil {
		return !e.pg.inFlight(e.seq, e.w)
	}
	return !l.tcp.inFlight(e.tcp)
}

// expire times out the echoes and TCP probes due by now that have not
// ended.
func (l *loop) expire(now time.Time) {
	for {
		at, ok := l.echoes.next()
		if !ok || at.After(now) {
			return
		}
		e := l.echoes.pop()
		var r result
		var mine bool
		if e.pg != nil {
			r, mine = e.pg.expire(e.seq, e.w)
		} else {
			r, mine = l.tcp.expire(e.tcp)
		}
		if mine {
			l.finish(r)
		}
	}
}

// launch runs one HTTP probe in its own goroutine, bounded by the
// settings' timeout, and hands its result to the loop.
func (l *loop) launch(t target, due time.Time) {
	timeout := l.set.timeout
	c := l.clients[t.net]
	if t.key.v6() {
		c = l.clients6[t.net]
	}
	l.probes.Go(func() {
		ctx, cancel := context.WithTimeout(l.ctx, timeout)
		rtt, status, msg := httpProbe(ctx, c, t.dst, t.port)
		cancel()
		l.box.put(result{key: t.key, due: due, rtt: rtt, status: status, msg: msg})
	})
}
