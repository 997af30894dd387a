package ingest

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/safetext"
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
}

// maxRTT bounds any round trip a summary may give.
const maxRTT = time.Minute

// maxMessageBytes bounds a summary's message.
const maxMessageBytes = 256

// Check checks r, from node's session, against l at now. A report whose
// seq, period or size is unusable is refused whole (ErrBadReport, naming
// the field). Summaries that are not believable (unknown destination,
// path or kind; received over sent; RTTs negative, not finite, out of
// order or over a minute; an OK status with losses; a control character
// in the message; a second summary of the same destination, path and
// kind) are removed from r and their reasons returned, each naming the
// summary's index, field and value: the rest of the report is kept.
func Check(r *agentv1.ProbeReport, l Limits, now time.Time) (dropped []string, err error) {
	if l.MaxSummaries == 0 {
		l.MaxSummaries = 100000
	}
	if l.MaxClockSkew == 0 {
		l.MaxClockSkew = time.Minute
	}
	if l.MaxAge == 0 {
		l.MaxAge = 7 * 24 * time.Hour
	}
	bad := func(format string, args ...any) ([]string, error) {
		return nil, fmt.Errorf("%w: seq %d: "+format, append([]any{ErrBadReport, r.GetSeq()}, args...)...)
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
	maxSent := uint32(math.MaxUint32)
	if l.Interval > 0 {
		maxSent = uint32(min(int64(period/l.Interval)+2, math.MaxUint32))
	}
	type key struct {
		dst  string
		path measurev1.Path
		kind agentv1.ProbeKind
	}
	seen := make(map[key]bool, len(r.GetSummaries()))
	kept := r.GetSummaries()[:0]
	for i, s := range r.GetSummaries() {
		why := checkSummary(s, l, maxSent)
		if why == "" {
			k := key{s.GetNode(), s.GetPath(), s.GetKind()}
			if seen[k] {
				why = fmt.Sprintf("a second summary of %s %v %v", s.GetNode(), s.GetPath(), s.GetKind())
			}
			seen[k] = true
		}
		if why != "" {
			dropped = append(dropped, fmt.Sprintf("summaries[%d]: %s", i, why))
			continue
		}
		kept = append(kept, s)
	}
	clear(r.GetSummaries()[len(kept):])
	r.Summaries = kept
	return dropped, nil
}

// checkSummary says what is wrong with s, or "".
func checkSummary(s *agentv1.ProbeSummary, l Limits, maxSent uint32) string {
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
	switch s.GetPath() {
	case measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_HOST_TO_POD, measurev1.Path_PATH_POD_TO_POD,
		measurev1.Path_PATH_HOST_TO_SERVICE, measurev1.Path_PATH_POD_TO_SERVICE:
	default:
		return fmt.Sprintf("path %v is not a probe path", s.GetPath())
	}
	if _, ok := agentv1.ProbeKind_name[int32(s.GetKind())]; !ok || s.GetKind() == agentv1.ProbeKind_PROBE_KIND_UNSPECIFIED {
		return fmt.Sprintf("kind %d is not a probe kind", s.GetKind())
	}
	if s.GetSent() > maxSent {
		return fmt.Sprintf("sent %d: the period holds at most %d probes", s.GetSent(), maxSent)
	}
	if s.GetReceived() > s.GetSent() {
		return fmt.Sprintf("received %d is over sent %d", s.GetReceived(), s.GetSent())
	}
	rtts := []struct {
		name string
		v    float64
	}{{"rtt_min_seconds", s.GetRttMinSeconds()}, {"rtt_median_seconds", s.GetRttMedianSeconds()},
		{"rtt_p90_seconds", s.GetRttP90Seconds()}, {"rtt_max_seconds", s.GetRttMaxSeconds()}}
	for i, f := range rtts {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > maxRTT.Seconds():
			return fmt.Sprintf("%s %v: want 0 to %v", f.name, f.v, maxRTT.Seconds())
		case s.GetReceived() == 0 && f.v != 0:
			return fmt.Sprintf("%s %v with no probe answered", f.name, f.v)
		case i > 0 && f.v < rtts[i-1].v:
			return fmt.Sprintf("%s %v is under %s %v", f.name, f.v, rtts[i-1].name, rtts[i-1].v)
		}
	}
	if _, ok := measurev1.Status_name[int32(s.GetStatus())]; !ok || s.GetStatus() == measurev1.Status_STATUS_UNSPECIFIED {
		return fmt.Sprintf("status %d is not a status", s.GetStatus())
	}
	if s.GetStatus() == measurev1.Status_STATUS_OK && (s.GetReceived() != s.GetSent() || s.GetSent() == 0) {
		return fmt.Sprintf("status OK with %d of %d probes answered", s.GetReceived(), s.GetSent())
	}
	if s.GetStatus() != measurev1.Status_STATUS_OK && s.GetSent() == 0 {
		return fmt.Sprintf("status %v with no probe sent", s.GetStatus())
	}
	if m := s.GetMessage(); len(m) > maxMessageBytes {
		return fmt.Sprintf("message of %d bytes, at most %d", len(m), maxMessageBytes)
	}
	for _, c := range s.GetMessage() {
		if safetext.NeedsEscape(c) { // controls, bidi overrides, invalid UTF-8
			return fmt.Sprintf("message %.64q contains a control character", s.GetMessage())
		}
	}
	return ""
}
