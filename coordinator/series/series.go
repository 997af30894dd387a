// Package series owns the domain of the continuous mesh's per-pair time
// series: what one agent report is (Report, Summary), what one stored
// interval summary of one series is (Key, Sample), the validation every
// report and sample goes through before it is stored, and the chunk codec
// that packs the samples of one series in one time block into a few bytes
// each (Encoder, EncodeChunk, DecodeChunk). It is pure Go: the bbolt
// buckets that hold heads and chunks are coordinator/store's.
//
// Round trip times are stored as integers of RTTResolution (100 ns); the
// API gives them as time.Duration, rounded to the nearest 100 ns. Start
// times and periods are kept to the nanosecond.
package series

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/safetext"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Limits of a valid report and sample.
const (
	// RTTResolution is the resolution round trip times are stored at:
	// they are rounded to the nearest multiple of it.
	RTTResolution = 100 * time.Nanosecond
	// MaxRTT is the largest round trip time accepted.
	MaxRTT = time.Hour
	// MaxPeriod is the longest report period accepted (agents report
	// every 10 s to 60 s, less when a failure ends a period early).
	MaxPeriod = time.Hour
	// MaxMessageBytes bounds a sample's failure message: what an agent
	// may send (safetext.MaxProbeMessageBytes).
	MaxMessageBytes = safetext.MaxProbeMessageBytes
	// MaxNodeBytes bounds a node name.
	MaxNodeBytes = 253
)

// ErrInvalid means a report, summary or sample was refused; the message
// names the field and its value. coordinator/store wraps it in its own
// ErrInvalid.
var ErrInvalid = errors.New("invalid series data")

// ErrCorrupt means stored bytes (a chunk) do not decode.
var ErrCorrupt = errors.New("corrupt series data")

// maxTime is the last instant whose UnixNano fits an int64.
var maxTime = time.Unix(0, 1<<63-1)

// Key names one series: the samples of one source node towards one
// destination (a node or an external target's name) on one path with one
// probe kind in one IP family.
type Key struct {
	// Src and Dst are the probing node and the probed one.
	Src, Dst string
	// Path is the path probed.
	Path measurev1.Path
	// Kind is the probe kind.
	Kind measurev1.ProbeKind
	// Family is the IP family probed: IP_FAMILY_UNSPECIFIED and
	// IP_FAMILY_IPV4 both name the IPv4 series (as before families).
	Family measurev1.IPFamily
}

// V6 reports whether k names an IPv6 series.
func (k Key) V6() bool { return k.Family == measurev1.IPFamily_IP_FAMILY_IPV6 }

// ValidFamily checks that f is IP_FAMILY_UNSPECIFIED (IPv4),
// IP_FAMILY_IPV4 or IP_FAMILY_IPV6.
func ValidFamily(field string, f measurev1.IPFamily) error {
	switch f {
	case measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6:
		return nil
	}
	return fmt.Errorf("%w: %s %d is not an IP family", ErrInvalid, field, int32(f))
}

// Sample is one stored interval summary of one series: the period
// [Start, Start+Period) of one agent report.
type Sample struct {
	// Start is when the period began (agent clock), at or after the Unix
	// epoch.
	Start time.Time
	// Period is its length, in (0, MaxPeriod].
	Period time.Duration
	// Sent counts the probes sent; Received, at most Sent, those answered.
	Sent, Received uint32
	// RTTMin <= RTTMedian <= RTTP90 <= RTTMax are over the answered
	// probes' round trips, in [0, MaxRTT], stored at RTTResolution; all
	// zero when Received is 0.
	RTTMin, RTTMedian, RTTP90, RTTMax time.Duration
	// Status is measurev1.Status_STATUS_OK when every probe was answered,
	// else the last failed probe's.
	Status measurev1.Status
	// Message is the last failure's words, at most MaxMessageBytes; only
	// kept when Status is not OK (dropped otherwise).
	Message string
}

// End is Start + Period.
func (s Sample) End() time.Time { return s.Start.Add(s.Period) }

// Summary is one destination, path and kind of a Report: a Sample
// without the period, which is the report's.
type Summary struct {
	// Dst is the probed node.
	Dst string
	// Path is the path probed.
	Path measurev1.Path
	// Kind is the probe kind.
	Kind measurev1.ProbeKind
	// Family is as in Key.
	Family measurev1.IPFamily
	// Sent and Received are as in Sample.
	Sent, Received uint32
	// RTTs as in Sample.
	RTTMin, RTTMedian, RTTP90, RTTMax time.Duration
	// Status is as in Sample.
	Status measurev1.Status
	// Message is as in Sample.
	Message string
}

// Sample is the summary as a sample of the period [start, start+period).
func (m Summary) Sample(start time.Time, period time.Duration) Sample {
	return Sample{
		Start: start, Period: period, Sent: m.Sent, Received: m.Received,
		RTTMin: m.RTTMin, RTTMedian: m.RTTMedian, RTTP90: m.RTTP90, RTTMax: m.RTTMax,
		Status: m.Status, Message: m.Message,
	}
}

// Report is one report period of one agent: Src's report number Seq
// (which names it: a report resent after a reconnect has the same Seq)
// over [Start, Start+Period), one summary per destination, path and kind.
type Report struct {
	// Src is the reporting node.
	Src string
	// Seq is the agent's report number within SeqEpoch.
	Seq uint64
	// SeqEpoch names the agent's numbering of Seq (agentv1.ProbeReport's
	// seq_epoch): a new one means the agent's seqs started again at 1.
	SeqEpoch uint64
	// Start is when the period began (agent clock).
	Start time.Time
	// Period is the period's length.
	Period time.Duration
	// Summaries are one per destination, path and kind.
	Summaries []Summary
}

// ValidNode checks a node name (src or dst) with CheckKey. The error
// wraps ErrInvalid and names field.
func ValidNode(field, name string) error {
	if err := CheckKey(field, name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// CheckKey checks a name or ID that goes into a store key (a node name, a
// run or work ID): non-empty, at most MaxNodeBytes, no NUL byte (the
// keys' separator). The error names field and the value (cut); callers
// wrap it with their own sentinel.
func CheckKey(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", field)
	case len(s) > MaxNodeBytes:
		return fmt.Errorf("%s %.20q... is longer than %d bytes", field, s, MaxNodeBytes)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s %q contains a NUL byte", field, s)
	}
	return nil
}

// ValidPath checks that p is a known path other than PATH_UNSPECIFIED.
func ValidPath(field string, p measurev1.Path) error {
	if !known(&knownPaths, int32(p)) {
		return fmt.Errorf("%w: %s %d is not a known path", ErrInvalid, field, int32(p))
	}
	return nil
}

// ValidKind checks that k is a known probe kind other than
// PROBE_KIND_UNSPECIFIED, under 8 (the store packs it in 3 bits, the
// fourth marks IPv6).
func ValidKind(field string, k measurev1.ProbeKind) error {
	if !known(&knownKinds, int32(k)) || k >= 8 {
		return fmt.Errorf("%w: %s %d is not a known probe kind", ErrInvalid, field, int32(k))
	}
	return nil
}

// ValidStatus checks that st is a known status other than
// STATUS_UNSPECIFIED.
func ValidStatus(field string, st measurev1.Status) error {
	if !known(&knownStatuses, int32(st)) {
		return fmt.Errorf("%w: %s %d is not a known status", ErrInvalid, field, int32(st))
	}
	return nil
}

// Known enum values other than 0 (UNSPECIFIED), as tables: the maps of
// the generated code are slow for one lookup per summary.
var knownPaths, knownKinds, knownStatuses = enumTable(measurev1.Path_name), enumTable(measurev1.ProbeKind_name), enumTable(measurev1.Status_name)

func enumTable(names map[int32]string) (t [64]bool) {
	for v := range names {
		if v > 0 && v < int32(len(t)) {
			t[v] = true
		}
	}
	return t
}

func known(t *[64]bool, v int32) bool { return v > 0 && v < int32(len(t)) && t[v] }

// validTimes checks a period's start and length.
func validTimes(start time.Time, period time.Duration) error {
	if !start.After(time.Unix(0, 0)) || !start.Before(maxTime.Add(-MaxPeriod)) {
		return fmt.Errorf("%w: start %v is not after the Unix epoch (or past 2262)", ErrInvalid, start)
	}
	if period <= 0 || period > MaxPeriod {
		return fmt.Errorf("%w: period %v is not in (0, %v]", ErrInvalid, period, MaxPeriod)
	}
	return nil
}

// plainOK is the common summary, valid by a few comparisons: every probe
// answered, status OK with no message, the round trips in order within
// MaxRTT, path and kind known. False says nothing (validate decides).
func plainOK(m *Summary) bool {
	return m.Status == measurev1.Status_STATUS_OK && m.Message == "" && m.Sent == m.Received && m.Sent > 0 &&
		m.RTTMin >= 0 && m.RTTMin <= m.RTTMedian && m.RTTMedian <= m.RTTP90 && m.RTTP90 <= m.RTTMax && m.RTTMax <= MaxRTT &&
		known(&knownPaths, int32(m.Path)) && known(&knownKinds, int32(m.Kind))
}

// rttNames are the round trips' field names, in validStats' order.
var rttNames = [4]string{"rtt_min", "rtt_median", "rtt_p90", "rtt_max"}

// validStats checks the counters, round trips, status and message shared
// by Sample and Summary.
func validStats(sent, received uint32, rtt [4]time.Duration, st measurev1.Status, msg string) error {
	if received > sent {
		return fmt.Errorf("%w: received %d is above sent %d", ErrInvalid, received, sent)
	}
	for i, d := range rtt {
		if d < 0 || d > MaxRTT {
			return fmt.Errorf("%w: %s %v is not in [0, %v]", ErrInvalid, rttNames[i], d, MaxRTT)
		}
		if received == 0 && d != 0 {
			return fmt.Errorf("%w: %s %v is not 0 while received is 0", ErrInvalid, rttNames[i], d)
		}
		if i > 0 && rtt[i-1] > d {
			return fmt.Errorf("%w: %s %v is above %s %v", ErrInvalid, rttNames[i-1], rtt[i-1], rttNames[i], d)
		}
	}
	if err := ValidStatus("status", st); err != nil {
		return err
	}
	if len(msg) > MaxMessageBytes {
		return fmt.Errorf("%w: message of %d bytes is longer than %d", ErrInvalid, len(msg), MaxMessageBytes)
	}
	return nil
}

// Validate checks every field of s; the error wraps ErrInvalid and names
// the field and its value.
func (s Sample) Validate() error {
	if err := validTimes(s.Start, s.Period); err != nil {
		return err
	}
	return validStats(s.Sent, s.Received, [4]time.Duration{s.RTTMin, s.RTTMedian, s.RTTP90, s.RTTMax}, s.Status, s.Message)
}

// Validate checks every field of m but its place in a report; the error
// wraps ErrInvalid and names the field and its value.
func (m Summary) Validate() error { return m.validate(true) }

// validate is Validate; it checks the destination's name only if dst.
func (m *Summary) validate(dst bool) error {
	if dst {
		if err := ValidNode("dst", m.Dst); err != nil {
			return err
		}
	}
	if err := ValidPath("path", m.Path); err != nil {
		return err
	}
	if err := ValidKind("kind", m.Kind); err != nil {
		return err
	}
	if err := ValidFamily("family", m.Family); err != nil {
		return err
	}
	return validStats(m.Sent, m.Received, [4]time.Duration{m.RTTMin, m.RTTMedian, m.RTTP90, m.RTTMax}, m.Status, m.Message)
}

// Validate checks the report's fields and every summary's (not that
// summaries are distinct: the store checks that once it has sorted
// them). The error wraps ErrInvalid and names the summary index, the
// field and its value.
func (r *Report) Validate() error {
	if err := ValidNode("src", r.Src); err != nil {
		return err
	}
	if err := validTimes(r.Start, r.Period); err != nil {
		return err
	}
	for j := range r.Summaries {
		m := &r.Summaries[j]
		// A report lists each destination's summaries together: its name
		// is checked once.
		newDst := j == 0 || m.Dst != r.Summaries[j-1].Dst
		if !newDst && plainOK(m) {
			continue // the common case, checked without a call
		}
		if err := m.validate(newDst); err != nil {
			return fmt.Errorf("summary %d (dst %q): %w", j, r.Summaries[j].Dst, err)
		}
	}
	return nil
}

// Ticks is d in RTTResolution units, rounded to the nearest; d must be
// non-negative.
func Ticks(d time.Duration) uint64 {
	return uint64((d + RTTResolution/2) / RTTResolution)
}

// FromTicks is the duration of t RTTResolution units.
func FromTicks(t uint64) time.Duration { return time.Duration(t) * RTTResolution }

// Quantize is s as it comes back from storage: round trips rounded to
// RTTResolution, the message dropped if the status is OK, times in UTC.
func Quantize(s Sample) Sample {
	s.Start = s.Start.UTC()
	s.RTTMin, s.RTTMedian = FromTicks(Ticks(s.RTTMin)), FromTicks(Ticks(s.RTTMedian))
	s.RTTP90, s.RTTMax = FromTicks(Ticks(s.RTTP90)), FromTicks(Ticks(s.RTTMax))
	if s.Status == measurev1.Status_STATUS_OK {
		s.Message = ""
	}
	return s
}
