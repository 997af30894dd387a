package diagnose

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Thresholds of the probe judge: a node is implicated on a path and probe
// kind when at least ProbeBadShare of the summaries of pairs it is in are
// bad (a loss or a failure) while at most ProbeOthersShare of the other
// pairs' are. Its summaries on a path and kind are clean when at most
// ProbeCleanShare of them are bad, and mixed between clean and
// implicated. A verdict is settled when every path and kind it rests on
// is bad on at least ProbeSettledShare of the node's summaries and none
// of the node's is mixed.
const (
	ProbeBadShare     = 0.5
	ProbeOthersShare  = 0.25
	ProbeCleanShare   = 0.1
	ProbeSettledShare = 0.9
	// probeExamples bounds the bad summaries a finding quotes.
	probeExamples = 3
	// probeDump bounds the bad summaries a period keeps for its dump.
	probeDump = 32
	// minLatencySummaries is the fewest answered summaries, of the node's
	// pairs and of the others, that a latency verdict is taken on: one
	// slow probe among a handful is noise.
	minLatencySummaries = 10
)

// ProbeJudgeConfig configures a ProbeJudge.
type ProbeJudgeConfig struct {
	// Slot is the probe interval. Agents end their report periods on the
	// wall clock's multiples of it (a period holding a new failure ends at
	// the end of that probe interval, the others at a multiple of the
	// report interval); a report belongs to the window that ends at its
	// period's end, rounded up to a multiple of Slot. Zero means 10 s.
	Slot time.Duration
	// Grace is how long after a window's end its last reports may still
	// come: an agent sends a period's report once its last probe is
	// answered or timed out (at most 1 s plus the probe timeout after the
	// period's end), and the report then crosses the network. Zero means
	// Slot.
	Grace time.Duration
}

// The log messages of the probe judge's verdicts (the coordinator logs
// them, with the node, the kind and the period): operators grep for them,
// and the lab's fault demo (deploy/lab/cluster) reads them back.
const (
	// LogPeriodJudged: a report period was judged (debug level, with its
	// verdicts and bad summaries).
	LogPeriodJudged = "probe period judged"
	// LogFaultLocalised: a fault was raised (warning level).
	LogFaultLocalised = "probe fault localised"
	// LogFaultCleared: a raised fault cleared (info level).
	LogFaultCleared = "probe fault cleared"
)

// ProbeJudge localises faults in the continuous mesh's reports, one
// report period at a time. AddReport counts a report's summaries in the
// window of its period (windows are Slot long and end on the wall clock's
// multiples of Slot, as the agents' periods do); Due judges each window as
// soon as its reports are in (one from every node expected) or, when some
// never come, Grace after its end. A report for a window already judged is
// too late and is not counted.
//
// The judge keeps counters per window, node, path and kind, never the
// summaries (but for a bounded dump of the bad ones): AddReport is
// O(summaries) and judging a window O(nodes x paths x kinds), so a window
// of a 1,000-node mesh is judged in well under its length.
//
// It publishes a node's fault (ProbePeriod.Raised) when a window's
// verdict on it is settled (see ProbeSettledShare), or when two windows in
// a row give the same unsettled verdict: a window in which a fault starts
// or ends holds a part of its probes before and a part after, and its
// verdict on the kind may be wrong (an ICMP drop whose full-size echoes
// happened to be probed after it began and small ones before looks like an
// MTU black hole). It is safe for concurrent use.
type ProbeJudge struct {
	cfg ProbeJudgeConfig

	mu      sync.Mutex
	windows map[int64]*probeWindow // open, by end (Unix nanoseconds)
	closed  int64                  // every window ending at or before it is judged
	faults  map[string]Finding     // published, by node
	pending map[string]Kind        // the last window's unsettled verdicts, by node
}

type pathKind struct {
	path measurev1.Path
	kind measurev1.ProbeKind
}

type probeKey struct {
	node string
	pk   pathKind
}

type probeAgg struct {
	total, bad int
	rttSum     float64 // sum of the answered summaries' medians, seconds
	rttN       int
	examples   []string
}

// sourcePeriods are the periods of one node's reports counted in a
// window: how many, and the end of the last.
type sourcePeriods struct {
	n   int
	end time.Time
}

// maxSourcePeriods is the most reports of one node a window counts: an
// agent ends one period a window, or two when its settings changed
// within it (the old period ends then, the new starts).
const maxSourcePeriods = 2

// probeWindow is one window's counters.
type probeWindow struct {
	end                time.Time
	sources            map[string]*sourcePeriods // the nodes whose reports are counted
	reports, summaries int
	bad                int
	dump               []string
	nodes              map[probeKey]*probeAgg // pairs the node is in, as source or destination
	global             map[pathKind]*probeAgg // every pair
}

// NewProbeJudge returns a judge with no window open.
func NewProbeJudge(cfg ProbeJudgeConfig) *ProbeJudge {
	if cfg.Slot <= 0 {
		cfg.Slot = 10 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = cfg.Slot
	}
	return &ProbeJudge{cfg: cfg, windows: map[int64]*probeWindow{}, faults: map[string]Finding{}, pending: map[string]Kind{}}
}

// windowEnd is the end of the window a period ending at end belongs to:
// end rounded up to a multiple of the slot.
func (j *ProbeJudge) windowEnd(end time.Time) time.Time {
	w := end.Truncate(j.cfg.Slot)
	if w.Before(end) {
		w = w.Add(j.cfg.Slot)
	}
	return w
}

// AddReport counts the summaries of src's report r (checked:
// coordinator/ingest), received at now, in the window of its period. It
// returns that window's end and how many nodes have reported in it so
// far; ok is false when the report is too late and nothing was counted:
// its window was judged already, or none is open and its deadline (end
// plus Grace) is before now (a report sent again after a restart), or
// src's report overlaps one of src's counted in that window, or src has
// maxSourcePeriods counted there already. An agent ends one period a
// window (two when its settings changed in it, each a part of the
// window), so a report over a period counted already is one sent again
// or a lie: one source's voice counts once however many reports it
// sends.
func (j *ProbeJudge) AddReport(now time.Time, src string, r *agentv1.ProbeReport) (end time.Time, sources int, ok bool) {
	end = j.windowEnd(r.GetPeriodStart().AsTime().Add(r.GetPeriod().AsDuration()))
	j.mu.Lock()
	defer j.mu.Unlock()
	if end.UnixNano() <= j.closed {
		return end, 0, false
	}
	w := j.windows[end.UnixNano()]
	if w == nil && end.Add(j.cfg.Grace).Before(now) {
		return end, 0, false
	}
	if w == nil {
		w = &probeWindow{end: end, sources: map[string]*sourcePeriods{}, nodes: map[probeKey]*probeAgg{}, global: map[pathKind]*probeAgg{}}
		j.windows[end.UnixNano()] = w
	}
	w.reports++
	start := r.GetPeriodStart().AsTime()
	seen := w.sources[src]
	if seen != nil && (seen.n >= maxSourcePeriods || start.Before(seen.end)) {
		return end, len(w.sources), false
	}
	if seen == nil {
		seen = &sourcePeriods{}
		w.sources[src] = seen
	}
	seen.n++
	seen.end = start.Add(r.GetPeriod().AsDuration())
	for _, s := range r.GetSummaries() {
		w.add(src, s)
	}
	return end, len(w.sources), true
}

// add counts one summary of src's.
func (w *probeWindow) add(src string, s *agentv1.ProbeSummary) {
	dst := s.GetNode()
	if dst == "" || s.GetSent() == 0 {
		return
	}
	w.summaries++
	pk := pathKind{s.GetPath(), s.GetKind()}
	bad := s.GetReceived() < s.GetSent()
	var example string
	if bad {
		w.bad++
		example = fmt.Sprintf("%s->%s %s %s: %d of %d lost", src, dst, testspec.PathName(pk.path), testspec.ProbeKindName(pk.kind),
			s.GetSent()-s.GetReceived(), s.GetSent())
		if m := s.GetMessage(); m != "" {
			example += " (" + safetext.Line(m) + ")"
		}
		if len(w.dump) < probeDump {
			w.dump = append(w.dump, example)
		}
	}
	for _, a := range []*probeAgg{aggOf(w.nodes, probeKey{src, pk}), aggOf(w.nodes, probeKey{dst, pk}), aggOf(w.global, pk)} {
		a.total++
		if bad {
			a.bad++
			if len(a.examples) < probeExamples {
				a.examples = append(a.examples, example)
			}
		}
		if s.GetReceived() > 0 {
			a.rttSum += s.GetRttMedianSeconds()
			a.rttN++
		}
	}
}

func aggOf[K comparable](m map[K]*probeAgg, k K) *probeAgg {
	a := m[k]
	if a == nil {
		a = &probeAgg{}
		m[k] = a
	}
	return a
}

// ProbePeriod is the judgment of one window.
type ProbePeriod struct {
	// Start and End bound the window: End is a multiple of the slot, Start
	// one slot before it.
	Start, End time.Time
	// Sources is how many nodes reported in it, Reports how many reports
	// came for it (more than Sources when a node's settings changed in
	// it, or a node sent a report again, which is not judged), Summaries
	// how many summaries with a probe sent were judged, Bad how many of
	// them lost a probe.
	Sources, Reports, Summaries, Bad int
	// Complete tells a window judged when every expected node had
	// reported from one judged at its deadline.
	Complete bool
	// Dump is the window's first bad summaries (at most 32), e.g.
	// "node-1->node-3 pod-pod icmp_mtu: 1 of 1 lost (timeout)".
	Dump []string
	// Verdicts is what this window alone says of each node, sorted by
	// node; Settled says which of them are settled.
	Verdicts []Finding
	// Settled is, per verdict, whether it is settled.
	Settled []bool
	// Faults are the published faults after this window, sorted by node.
	Faults []Finding
	// Raised are the faults published by this window (new, or of another
	// kind than before); Cleared the nodes' faults it took back.
	Raised, Cleared []Finding
}

// Open returns how many windows are open.
func (j *ProbeJudge) Open() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.windows)
}

// NextDeadline is when the oldest open window is judged at the latest
// (zero: none open).
func (j *ProbeJudge) NextDeadline() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	var first time.Time
	for _, w := range j.windows {
		if first.IsZero() || w.end.Before(first) {
			first = w.end
		}
	}
	if first.IsZero() {
		return first
	}
	return first.Add(j.cfg.Grace)
}

// Due judges the open windows that are ready at now, oldest first: a
// window is ready when expected nodes or more have reported in it, or at
// its end plus Grace. It stops at the first window that is not ready, so
// that windows are judged in order.
func (j *ProbeJudge) Due(now time.Time, expected int) []ProbePeriod {
	j.mu.Lock()
	defer j.mu.Unlock()
	ends := slices.Sorted(maps.Keys(j.windows))
	var out []ProbePeriod
	for _, k := range ends {
		w := j.windows[k]
		complete := expected > 0 && len(w.sources) >= expected
		if !complete && now.Before(w.end.Add(j.cfg.Grace)) {
			break
		}
		delete(j.windows, k)
		j.closed = k
		out = append(out, j.judge(w, complete))
	}
	return out
}

// judge judges w and updates the published faults. j.mu is held.
func (j *ProbeJudge) judge(w *probeWindow, complete bool) ProbePeriod {
	p := ProbePeriod{Start: w.end.Add(-j.cfg.Slot), End: w.end, Sources: len(w.sources), Reports: w.reports,
		Summaries: w.summaries, Bad: w.bad, Complete: complete, Dump: w.dump}
	p.Verdicts, p.Settled = w.verdicts()
	seen := map[string]bool{}
	pending := map[string]Kind{}
	for i, f := range p.Verdicts {
		seen[f.Node] = true
		old, had := j.faults[f.Node]
		switch {
		case had && old.Kind == f.Kind:
			j.faults[f.Node] = f // persists
		case p.Settled[i] || j.pending[f.Node] == f.Kind:
			j.faults[f.Node] = f
			p.Raised = append(p.Raised, f)
		default:
			pending[f.Node] = f.Kind // wait for the next window
		}
	}
	j.pending = pending
	for node, f := range j.faults {
		if !seen[node] {
			delete(j.faults, node)
			p.Cleared = append(p.Cleared, f)
		}
	}
	slices.SortFunc(p.Cleared, func(a, b Finding) int { return cmp.Compare(a.Node, b.Node) })
	for _, f := range j.faults {
		p.Faults = append(p.Faults, f)
	}
	slices.SortFunc(p.Faults, func(a, b Finding) int { return cmp.Compare(a.Node, b.Node) })
	return p
}
