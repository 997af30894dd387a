package probe

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Single runs single TCP and HTTP probes from one network, on demand and
// outside any plan or schedule, with the very code the Prober's probes
// run (a tcpProber of its own, started and waited on as the Prober's loop
// does, and httpProbe, through the same dialer and HTTP client
// construction): what it measures is what the Prober measures, minus the
// Prober's pacing. It exists so that a test can run the production probe
// at a reference tool's conditions (deploy/lab's TestProbeFidelity runs it
// back to back, as qperf tcp_lat runs). A Single may be used from one
// goroutine at a time; Close releases it.
type Single struct {
	d   dialer
	c   *http.Client
	box *mailbox
	tp  *tcpProber // made at the first TCP probe; its wait goroutine runs until Close
}

// NewSingle returns a Single probing from n (its namespace and source
// address; n.Net and n.MTU are not used).
func NewSingle(n Network) *Single {
	d := dialer{ns: n.NetNS, src: n.IP}
	return &Single{d: d, c: httpClient(d)}
}

// Probe runs one probe of kind against dst, bounded by ctx (which must
// have a deadline for a TCP probe: it is the probe's deadline), and
// returns what the Prober would record for it: the round trip (for
// PROBE_KIND_TCP the one-byte echo on a fresh connection, from the write
// to the echoed byte; for PROBE_KIND_HTTP a GET / on a fresh connection,
// from connect(2) to the answer's last byte), its status and, unless OK,
// a message. Other kinds are STATUS_TOOL_ERROR: ICMP probes share the
// Prober's raw sockets and reader and have no single-probe form.
func (s *Single) Probe(ctx context.Context, kind measurev1.ProbeKind, dst netip.AddrPort) (time.Duration, measurev1.Status, string) {
	switch kind {
	case measurev1.ProbeKind_PROBE_KIND_TCP:
		dl, ok := ctx.Deadline()
		if !ok {
			return 0, measurev1.Status_STATUS_TOOL_ERROR, "a TCP probe needs a context with a deadline"
		}
		if err := ctx.Err(); err != nil {
			return 0, netStatus(err), err.Error()
		}
		return s.tcp(dl, dst)
	case measurev1.ProbeKind_PROBE_KIND_HTTP:
		return httpProbe(ctx, s.c, dst.Addr(), dst.Port())
	}
	return 0, measurev1.Status_STATUS_TOOL_ERROR, fmt.Sprintf("no single probe of kind %v", kind)
}

// tcp runs one TCP probe to dst until dl, as the Prober's loop runs one:
// started, seen through by the tcpProber's wait, expired at dl.
func (s *Single) tcp(dl time.Time, dst netip.AddrPort) (time.Duration, measurev1.Status, string) {
	if s.tp == nil {
		s.box = newMailbox(time.Now)
		s.box.eager.Store(true) // every result wakes Probe
		tp, err := newTCPProber(s.box)
		if err != nil {
			return 0, measurev1.Status_STATUS_TOOL_ERROR, err.Error()
		}
		s.tp = tp
		go tp.wait() // owner: s; ends at Close (stop closes the epoll instance)
	}
	id, r, ok := s.tp.start(s.d, seriesKey{}, time.Now(), dst.Addr(), dst.Port())
	if !ok {
		return r.rtt, r.status, r.msg
	}
	timer := time.NewTimer(time.Until(dl))
	defer timer.Stop()
	var rs []result
	for {
		select {
		case <-s.box.wake:
			if rs = s.box.take(rs[:0]); len(rs) > 0 {
				return rs[0].rtt, rs[0].status, rs[0].msg
			}
		case <-timer.C:
			if r, mine := s.tp.expire(id); mine {
				return r.rtt, r.status, r.msg
			}
			// wait took it meanwhile: it is in the mailbox, or about to be
			for rs = s.box.take(rs[:0]); len(rs) == 0; rs = s.box.take(rs[:0]) {
				<-s.box.wake
			}
			return rs[0].rtt, rs[0].status, rs[0].msg
		}
	}
}

// Close stops the TCP probes' waiting goroutine and closes the HTTP
// client's idle connections (there are none: every probe's connection is
// closed after it).
func (s *Single) Close() {
	if s.tp != nil {
		s.tp.stop()
	}
	s.c.CloseIdleConnections()
}
