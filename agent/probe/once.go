package probe

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Single runs single TCP and HTTP probes from one network, on demand and
// outside any plan or schedule, with the very functions the Prober's TCP
// workers and HTTP probes call (tcpProbe and httpProbe, through the same
// dialer and HTTP client construction): what it measures is what the
// Prober measures, minus the Prober's pacing. It exists so that a test can
// run the production probe at a reference tool's conditions (deploy/lab's
// TestProbeFidelity runs it back to back, as qperf tcp_lat runs). A Single
// may be used from one goroutine at a time; Close releases it.
type Single struct {
	d dialer
	c *http.Client
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
func (s *Single) Probe(ctx context.Context, kind agentv1.ProbeKind, dst netip.AddrPort) (time.Duration, measurev1.Status, string) {
	switch kind {
	case agentv1.ProbeKind_PROBE_KIND_TCP:
		dl, ok := ctx.Deadline()
		if !ok {
			return 0, measurev1.Status_STATUS_TOOL_ERROR, "a TCP probe needs a context with a deadline"
		}
		if err := ctx.Err(); err != nil {
			return 0, netStatus(err), err.Error()
		}
		return tcpProbe(s.d, dst.Addr(), dst.Port(), dl, nil)
	case agentv1.ProbeKind_PROBE_KIND_HTTP:
		return httpProbe(ctx, s.c, dst.Addr(), dst.Port())
	}
	return 0, measurev1.Status_STATUS_TOOL_ERROR, fmt.Sprintf("no single probe of kind %v", kind)
}

// Close closes the HTTP client's idle connections (there are none: every
// probe's connection is closed after it).
func (s *Single) Close() { s.c.CloseIdleConnections() }
