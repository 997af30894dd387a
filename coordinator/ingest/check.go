package ingest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrBadReport wraps every refusal of a whole report; the message names
// the field and value.
var ErrBadReport = errors.New("bad probe report")

// Limits are what a report is checked against: the settings of the plan
// the coordinator gave the agent, and the peers it may report on.
type Limits struct {
	// Interval and ReportInterval are the plan's; a report's period is at
	// most ReportInterval (plus a second of slack), and each summary's
	// sent count at most the probes that period holds, plus one.
	Interval, ReportInterval time.Duration
	// MaxSummaries bounds a report's summaries (peers x paths x kinds of
	// the plan); zero means 100,000.
	MaxSummaries int
	// IsPeer reports whether a destination node name is a peer of the
	// agent's plan; nil means any valid node name.
	IsPeer func(name string) bool
	// MaxClockSkew is how far a period may start ahead of the
	// coordinator's clock; zero means 1 min.
	MaxClockSkew time.Duration
	// MaxAge is how far in the past a period may start (reports spooled
	// across a long outage are still taken); zero means 7 days.
	MaxAge time.Duration
	// Timeout is the plan's probe timeout: no round trip is longer (plus
	// sanity.ProbeSlack); zero means 1 min.
	Timeout time.Duration
	// Families are the plan's ProbeSettings.ip_families; empty means IPv4
	// only. A summary's ip_family (IP_FAMILY_UNSPECIFIED is IPv4) must be
	// one of them.
	Families []measurev1.IPFamily
	// HasAddr reports whether a destination has an address of the family
	// on the path's network; nil means any. Asked for IPv6 summaries only
	// (an IPv4 summary's peer is checked by IsPeer, as before families).
	HasAddr func(name string, path measurev1.Path, f measurev1.IPFamily) bool
}

// Family is a summary's family as stored: IP_FAMILY_UNSPECIFIED (a
// summary from before families, or of a plan without ip_families) is
// IPv4.
func Family(s *agentv1.ProbeSummary) measurev1.IPFamily {
	if f := s.GetIpFamily(); f != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		return f
	}
	return measurev1.IPFamily_IP_FAMILY_IPV4
}

// Invalid is a summary whose figures failed the checks: Check made it a
// failed summary (sanity.InvalidSummary) rather than a sample.
type Invalid struct {
	// Index is the summary's index in the report as it came.
	Index int
	// Err is the *sanity.Error naming the figure.
	Err error
}

// Check checks r, from node's session, against l at now. A report whose
// seq, period or size is unusable is refused whole (ErrBadReport, naming
// the field). Summaries that name nothing to store (an unknown
// destination, path, kind or status; an IP family not in the plan's, or
// one the destination has no address of on the path; a control character
// in the message, or a message too long; a second summary of the same
// destination, path, kind and family) are removed from r and their reasons returned in dropped,
// each naming the summary's index, field and value. Summaries whose
// figures are not believable (coordinator/sanity: received over sent;
// RTTs negative, not finite, out of order or over the probe timeout; an
// OK status with losses) stay, as failed summaries without figures
// (STATUS_INVALID, the reason as message), and are listed in invalid.
// The rest of the report is kept as it is.
func Check(r *agentv1.ProbeReport, l Limits, now time.Time) (dropped []string, invalid []Invalid, err error) {
	if l.MaxSummaries == 0 {
		l.MaxSummaries = 100000
	}
	if l.MaxClockSkew == 0 {
		l.MaxClockSkew = time.Minute
	}
	if l.MaxAge == 0 {
		l.MaxAge = 7 * 24 * time.Hour
	}
	bad := func(format string, args ...any) ([]string, []Invalid, error) {
		return nil, nil, fmt.Errorf("%w: seq %d: "+format, append([]any{ErrBadReport, r.GetSeq()}, args...)...)
	}
	if r.GetSeq() == 0 {
		return bad("seq is 0")
	}
	if err := r.GetPeriodStart().CheckValid(); err != nil {
		return bad("period_start: %v", err)
	}
	if err := r.GetPeriod().CheckValid(); err != nil {
		return bad("period: %v", err)
	}
	start, period := r.GetPeriodStart().AsTime(), r.GetPeriod().AsDuration()
	switch {
	case period <= 0 || (l.ReportInterval > 0 && period > l.ReportInterval+time.Second):
		return bad("period %v: want more than 0 and at most the report interval %v", period, l.ReportInterval)
	case start.After(now.Add(l.MaxClockSkew)):
		return bad("period_start %v is %v ahead of the coordinator's clock", start.UTC(), start.Sub(now).Round(time.Millisecond))
	case start.Before(now.Add(-l.MaxAge)):
		return bad("period_start %v is older than %v", start.UTC(), l.MaxAge)
	case len(r.GetSummaries()) > l.MaxSummaries:
		return bad("%d summaries, at most %d", len(r.GetSummaries()), l.MaxSummaries)
	}
	maxSent := uint32(0) // no bound
	if l.Interval > 0 {
		maxSent = uint32(min(int64(period/l.Interval)+2, math.MaxUint32))
	}
	type key struct {
		dst  string
		path measurev1.Path
		kind measurev1.ProbeKind
		fam  measurev1.IPFamily
	}
	seen := make(map[key]bool, len(r.GetSummaries()))
	kept := r.GetSummaries()[:0]
	for i, s := range r.GetSummaries() {
		why := checkSummary(s, l)
		if why == "" {
			k := key{s.GetNode(), s.GetPath(), s.GetKind(), Family(s)}
			if seen[k] {
				why = fmt.Sprintf("a second summary of %s %v %v %v", s.GetNode(), s.GetPath(), s.GetKind(), k.fam)
			}
			seen[k] = true
		}
		if why != "" {
			dropped = append(dropped, fmt.Sprintf("summaries[%d]: %s", i, why))
			continue
		}
		// A Timeout of 0 bounds round trips by sanity's one minute.
		if err := sanity.CheckSummary(s, l.Timeout, maxSent); err != nil {
			sanity.InvalidSummary(s, err, safetext.MaxProbeMessageBytes)
			invalid = append(invalid, Invalid{Index: i, Err: fmt.Errorf("summaries[%d] (dst %s %v %v): %w", i, s.GetNode(), s.GetPath(), s.GetKind(), err)})
		}
		kept = append(kept, s)
	}
	clear(r.GetSummaries()[len(kept):])
	r.Summaries = kept
	return dropped, invalid, nil
}

// checkSummary says what is wrong with s's destination, path, kind,
// status or message (what it names and says, not its figures), or "".
func checkSummary(s *agentv1.ProbeSummary, l Limits) string {
	node, ok := s.GetDst().(*agentv1.ProbeSummary_Node)
	if !ok {
		return fmt.Sprintf("dst %T: want a node (external targets are not probed continuously)", s.GetDst())
	}
	if err := protocol.ValidateNodeName(node.Node); err != nil {
		return fmt.Sprintf("dst.node: %v", err)
	}
	if l.IsPeer != nil && !l.IsPeer(node.Node) {
		return fmt.Sprintf("dst.node %q is not a peer of the agent's plan", node.Node)
	}
	if !testspec.IsProbePath(s.GetPath()) {
		return fmt.Sprintf("path %v is not a probe path", s.GetPath())
	}
	if !testspec.IsProbeKind(s.GetKind()) {
		return fmt.Sprintf("kind %d is not a probe kind", s.GetKind())
	}
	if _, ok := measurev1.Status_name[int32(s.GetStatus())]; !ok || s.GetStatus() == measurev1.Status_STATUS_UNSPECIFIED {
		return fmt.Sprintf("status %d is not a status", s.GetStatus())
	}
	if why := checkFamily(s, node.Node, l); why != "" {
		return why
	}
	if m := s.GetMessage(); len(m) > safetext.MaxProbeMessageBytes {
		return fmt.Sprintf("message of %d bytes, at most %d", len(m), safetext.MaxProbeMessageBytes)
	}
	for _, c := range s.GetMessage() {
		if safetext.NeedsEscape(c) { // controls, bidi overrides, invalid UTF-8
			return fmt.Sprintf("message %.64q contains a control character", s.GetMessage())
		}
	}
	return ""
}

// checkFamily says what is wrong with s's ip_family, or "".
func checkFamily(s *agentv1.ProbeSummary, node string, l Limits) string {
	f := Family(s)
	switch f {
	case measurev1.IPFamily_IP_FAMILY_IPV4:
		if len(l.Families) > 0 && !slices.Contains(l.Families, f) {
			return fmt.Sprintf("ip_family %v is not one of the plan's ip_families %v", f, l.Families)
		}
		return ""
	case measurev1.IPFamily_IP_FAMILY_IPV6:
		if !slices.Contains(l.Families, f) {
			return fmt.Sprintf("ip_family %v is not one of the plan's ip_families %v (empty: IPv4 only)", f, l.Families)
		}
		if l.HasAddr != nil && !l.HasAddr(node, s.GetPath(), f) {
			return fmt.Sprintf("ip_family %v: dst.node %q has no IPv6 address on path %v", f, node, s.GetPath())
		}
		return ""
	}
	return fmt.Sprintf("ip_family %d is not an IP family", s.GetIpFamily())
}
