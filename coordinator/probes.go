package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/ingest"
	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/coordinator/series"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/tick"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// probeSink checks each agent report where it arrives and queues it for
// the group-committing ingester: the registry's ReportSink.
type probeSink struct {
	in       *ingest.Ingester
	reg      *registry.Registry
	peers    *probeplan.Table
	settings *agentv1.ProbeSettings // nil: no probes configured
	log      *slog.Logger
	invalid  *sanity.Counter // summaries whose figures failed; nil: not counted
	warn     sanity.Limiter  // of refused reports and summaries, per node

	judge  *diagnose.ProbeJudge // the open report periods' summaries
	judgeC chan struct{}        // capacity 1: a report came (judgeProbes)
	// meshNodes counts the known nodes of a default mesh (nil: none); a
	// restarted coordinator knows them from its store before their agents
	// register again.
	meshNodes func() int

	mu       sync.Mutex
	reported map[string]reported // by node: its last report taken
	faults   []diagnose.Finding  // of the last judged interval
	judged   time.Duration       // how long that took
}

// reported is what a node's last report covered, and when it came.
type reported struct {
	summaries int // with at least one probe sent
	at        time.Time
}

var _ registry.ReportSink = (*probeSink)(nil)

// Report checks r against the plan's settings and peers: a report refused
// whole is acknowledged and dropped (it will never become good) and
// registry.ErrReportRefused returned (it proves nothing), bad
// summaries are dropped from it (logged), summaries whose figures fail
// become failed STATUS_INVALID summaries (counted in invalid, logged at
// most once a minute per node), the rest is queued.
func (p *probeSink) Report(node string, r *agentv1.ProbeReport, ack func()) error {
	l := ingest.Limits{IsPeer: p.reg.IsPeer, HasAddr: p.reg.HasProbeAddr}
	if p.settings != nil {
		l.Interval, l.ReportInterval = p.settings.GetInterval().AsDuration(), p.settings.GetReportInterval().AsDuration()
		l.Timeout = p.settings.GetTimeout().AsDuration()
		l.Families = p.settings.GetIpFamilies()
	}
	dropped, invalid, err := ingest.Check(r, l, time.Now())
	if err != nil {
		p.warn.Warn(p.log, node, "probe report refused; dropped", "err", err)
		ack()
		return fmt.Errorf("%w: %w", registry.ErrReportRefused, err)
	}
	if len(dropped) > 0 {
		p.warn.Warn(p.log, node, "probe report: unbelievable summaries dropped", "seq", r.GetSeq(), "dropped", len(dropped), "first", dropped[0])
	}
	if err := p.in.Submit(node, r, ack); err != nil {
		return err // sent again, and checked again
	}
	for _, iv := range invalid {
		p.invalid.Add(sanity.SourceProbe, iv.Err)
	}
	if len(invalid) > 0 {
		p.warn.Warn(p.log, node, "probe report: summaries whose figures failed the checks stored as invalid, not as samples",
			"seq", r.GetSeq(), "invalid", len(invalid), "reason", string(sanity.ReasonOf(invalid[0].Err)), "first", invalid[0].Err.Error())
	}
	n := 0
	for _, s := range r.GetSummaries() {
		if s.GetSent() > 0 {
			n++
		}
	}
	if _, _, ok := p.judge.AddReport(time.Now(), node, ipv4Only(r)); !ok {
		p.log.Debug("probe report not judged: too late, or a second of the node's in its window", "node", node, "seq", r.GetSeq(),
			"period_start", r.GetPeriodStart().AsTime().UTC().Format(time.RFC3339Nano))
	}
	select {
	case p.judgeC <- struct{}{}:
	default:
	}
	p.mu.Lock()
	p.reported[node] = reported{summaries: n, at: time.Now()}
	p.mu.Unlock()
	return nil
}

// publishedFaults is a copy of the faults the last judged period
// published; nil when there are none.
func (p *probeSink) publishedFaults() []diagnose.Finding {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.faults)
}

// ProbeStatus is the continuous mesh's status for /metrics: the ingest
// counters, and the coverage of the last report interval (the summaries
// of the reports that came within 1.5 report intervals, against every
// ordered pair x path x kind x family of the plans). It costs O(nodes).
func (p *probeSink) ProbeStatus() metrics.ProbeStatus {
	st := p.in.Stats()
	out := metrics.ProbeStatus{Reports: st.Reports, Summaries: st.Summaries, Resent: st.Resent, Batches: st.Batches, Refused: st.Refused,
		Busy: st.Busy, WriteErrors: st.WriteErrors, Peers: p.peers.Len(), PlansAcked: p.reg.PlansAcked()}
	p.mu.Lock()
	out.Faults, out.JudgeSeconds = p.faults, p.judged.Seconds()
	p.mu.Unlock()
	if p.settings == nil || out.Peers < 2 {
		return out
	}
	window := p.settings.GetReportInterval().AsDuration() * 3 / 2
	// Each listed family is a series of its own (a node without an IPv6
	// address makes dual-stack coverage read lower than it is).
	fams := max(1, len(p.settings.GetIpFamilies()))
	expected := float64(out.Peers) * float64(out.Peers-1) * float64(len(p.settings.GetPaths())*len(p.settings.GetKinds())*fams)
	now := time.Now()
	got := 0
	p.mu.Lock()
	for node, r := range p.reported {
		switch {
		case now.Sub(r.at) <= window:
			got += r.summaries
		case now.Sub(r.at) > time.Hour:
			delete(p.reported, node)
		}
	}
	p.mu.Unlock()
	out.Coverage = min(1, float64(got)/expected)
	return out
}

// ipv4Only is r without its IPv6 summaries (the fault judge and the mesh
// view are IPv4's): r itself when it has none, else a shallow copy.
func ipv4Only(r *agentv1.ProbeReport) *agentv1.ProbeReport {
	if !slices.ContainsFunc(r.GetSummaries(), isV6) {
		return r
	}
	out := proto.Clone(r).(*agentv1.ProbeReport)
	out.Summaries = slices.DeleteFunc(out.Summaries, isV6)
	return out
}

func isV6(s *agentv1.ProbeSummary) bool {
	return s.GetIpFamily() == measurev1.IPFamily_IP_FAMILY_IPV6
}

// ipv4Series drops the IPv6 summaries of reports, in place (remote
// write exports the IPv4 series only: its labels name no family).
func ipv4Series(reports []series.Report) []series.Report {
	for i := range reports {
		if slices.ContainsFunc(reports[i].Summaries, func(m series.Summary) bool { return m.Family == measurev1.IPFamily_IP_FAMILY_IPV6 }) {
			r := reports[i]
			r.Summaries = slices.DeleteFunc(slices.Clone(r.Summaries), func(m series.Summary) bool { return m.Family == measurev1.IPFamily_IP_FAMILY_IPV6 })
			reports[i] = r
		}
	}
	return reports
}

// seriesReport is a checked report as the store keeps it.
func seriesReport(node string, r *agentv1.ProbeReport) series.Report {
	out := series.Report{Src: node, Seq: r.GetSeq(), SeqEpoch: r.GetSeqEpoch(), Start: r.GetPeriodStart().AsTime(), Period: r.GetPeriod().AsDuration(),
		Summaries: make([]series.Summary, 0, len(r.GetSummaries()))}
	for _, s := range r.GetSummaries() {
		out.Summaries = append(out.Summaries, series.Summary{
			Dst: s.GetNode(), Path: s.GetPath(), Kind: s.GetKind(), Sent: s.GetSent(), Received: s.GetReceived(),
			RTTMin: seconds(s.GetRttMinSeconds()), RTTMedian: seconds(s.GetRttMedianSeconds()),
			RTTP90: seconds(s.GetRttP90Seconds()), RTTMax: seconds(s.GetRttMaxSeconds()),
			Status: s.GetStatus(), Message: s.GetMessage(), Family: ingest.Family(s),
		})
	}
	return out
}

// seconds converts a checked figure in seconds (finite, 0 to the probe
// timeout plus sanity.ProbeSlack).
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// seriesStore is what the ingester's writes need of the store.
type seriesStore interface {
	AppendReports(ctx context.Context, reports []series.Report) (stored []bool, err error)
}

// storedReports is told the reports once stored, each once (remote
// write); it must not block.
type storedReports interface {
	Reports(reports []series.Report)
}

// writeReports is the ingester's WriteFunc over st: one transaction per
// batch; the reports the store refuses are named per index. The reports
// stored are passed to each of then.
func writeReports(st seriesStore, then ...storedReports) ingest.WriteFunc {
	return func(ctx context.Context, batch []ingest.Report) ([]error, error) {
		reports := make([]series.Report, len(batch))
		for i, b := range batch {
			reports[i] = seriesReport(b.Node, b.Report)
		}
		stored, err := st.AppendReports(ctx, reports)
		if len(then) > 0 && stored != nil {
			kept := make([]series.Report, 0, len(reports))
			for i, ok := range stored {
				if ok && i < len(reports) {
					kept = append(kept, reports[i])
				}
			}
			kept = ipv4Series(kept)
			for _, t := range then {
				t.Reports(kept)
			}
		}
		var refused store.ReportErrors
		if err != nil && !errors.As(err, &refused) {
			return nil, err
		}
		out := make([]error, len(batch))
		for i, ok := range stored {
			if !ok && i < len(out) {
				out[i] = ingest.ErrStoredAlready // unless refused, below
			}
		}
		for _, e := range refused {
			if e.Index >= 0 && e.Index < len(out) {
				out[e.Index] = e
			}
		}
		return out, nil
	}
}

// syncProbesEvery is how often node states are brought into the peer
// table (departures, maintenance).
const syncProbesEvery = 5 * time.Second

// syncProbes keeps the probe plans in line with the nodes' states until
// ctx ends.
func syncProbes(ctx context.Context, reg *registry.Registry) error {
	tick.Every(ctx, syncProbesEvery, reg.SyncProbes)
	return nil
}

// compactEvery is how often stored report heads are moved into per-series
// chunks.
const compactEvery = time.Minute

// compactSeries moves the report heads whose period ended more than keep
// ago into chunks, once each interval of every (compactEvery), until ctx
// ends. keep is the probe mesh's freshness (web.ProbeFreshness): each
// node's newest reports, which the mesh reads from the head, stay there,
// so that the mesh does not go empty for a report period after each
// compaction.
func compactSeries(ctx context.Context, st seriesCompactor, every, keep time.Duration, log *slog.Logger) error {
	tick.Every(ctx, every, func() {
		n, err := st.CompactSeries(ctx, time.Now().Add(-keep))
		if err != nil && ctx.Err() == nil {
			log.Error("compact probe series", "err", err)
		} else if n > 0 {
			log.Debug("probe series compacted", "reports", n)
		}
	})
	return nil
}

// seriesCompactor is what compactSeries needs of the store.
type seriesCompactor interface {
	CompactSeries(ctx context.Context, before time.Time) (int, error)
}

// judgeGrace is how long after a report period's end the judge waits
// for its last reports: the agent sends a period once its last probe is
// answered or timed out (1 s plus the probe timeout after the end at the
// latest), plus transitGrace for the report to come and be checked.
func judgeGrace(s *agentv1.ProbeSettings) time.Duration {
	return time.Second + s.GetTimeout().AsDuration() + transitGrace
}

// transitGrace is the time allowed for a report to reach the coordinator.
const transitGrace = time.Second

// newProbeJudge returns the judge of the continuous mesh of s (nil: none
// configured; a judge that is never fed).
func newProbeJudge(s *agentv1.ProbeSettings) *diagnose.ProbeJudge {
	if s == nil {
		return diagnose.NewProbeJudge(diagnose.ProbeJudgeConfig{})
	}
	return diagnose.NewProbeJudge(diagnose.ProbeJudgeConfig{Slot: s.GetInterval().AsDuration(), Grace: judgeGrace(s)})
}

// expectedReporters is how many nodes a report period waits for: every
// node of the probe plans or of a default mesh, or more if more reported
// in the last 1.5 report intervals. It costs O(nodes).
func (p *probeSink) expectedReporters(now time.Time) int {
	window := p.settings.GetReportInterval().AsDuration() * 3 / 2
	n := 0
	p.mu.Lock()
	for _, r := range p.reported {
		if now.Sub(r.at) <= window {
			n++
		}
	}
	p.mu.Unlock()
	if p.meshNodes != nil {
		n = max(n, p.meshNodes())
	}
	return max(n, p.peers.Len())
}

// judgeProbes judges each report period of the continuous mesh as soon as
// its reports are in (one from each expected node, counted again after
// each period judged and at each deadline: O(nodes) per period, not per
// report) or, failing that, judgeGrace after its end, until ctx ends: it
// logs each fault the probes
// localise when it is published ("probe fault localised", with the period
// it was judged in) and when it clears, every period judged at debug
// level with its first bad summaries ("probe period judged"), and keeps
// the faults for /metrics.
func (p *probeSink) judgeProbes(ctx context.Context) error {
	if p.settings == nil {
		return nil
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	expected := p.expectedReporters(time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.judgeC:
		case <-timer.C:
			expected = p.expectedReporters(time.Now())
		}
		start := time.Now()
		periods := p.judge.Due(start, expected)
		took := time.Since(start)
		if len(periods) > 0 {
			expected = p.expectedReporters(time.Now())
		}
		for _, per := range periods {
			p.logPeriod(per)
		}
		if len(periods) > 0 {
			p.mu.Lock()
			p.faults, p.judged = periods[len(periods)-1].Faults, took/time.Duration(len(periods))
			p.mu.Unlock()
		}
		next := time.Hour
		if d := p.judge.NextDeadline(); !d.IsZero() {
			next = max(time.Until(d), 10*time.Millisecond)
		}
		timer.Reset(next)
	}
}

// logPeriod logs one judged period: its dump at debug level, then the
// faults it published and cleared.
func (p *probeSink) logPeriod(per diagnose.ProbePeriod) {
	start, end := per.Start.UTC().Format(time.RFC3339Nano), per.End.UTC().Format(time.RFC3339Nano)
	if p.log.Enabled(context.Background(), slog.LevelDebug) {
		verdicts := make([]string, len(per.Verdicts))
		for i, f := range per.Verdicts {
			verdicts[i] = fmt.Sprintf("%s:%s", f.Node, f.Kind)
			if !per.Settled[i] {
				verdicts[i] += "(unsettled)"
			}
		}
		p.log.Debug(diagnose.LogPeriodJudged, "period_start", start, "period_end", end, "complete", per.Complete,
			"sources", per.Sources, "reports", per.Reports, "summaries", per.Summaries, "bad", per.Bad,
			"verdicts", strings.Join(verdicts, ","), "dump", strings.Join(per.Dump, "; "))
	}
	for _, f := range per.Raised {
		p.log.Warn(diagnose.LogFaultLocalised, "node", f.Node, "kind", f.Kind, "period_start", start, "period_end", end,
			"of", f.Of, "e.g.", strings.Join(f.Bad, "; ")) //nolint:sloglint // "e.g." is the key operators read and grep for
	}
	for _, f := range per.Cleared {
		p.log.Info(diagnose.LogFaultCleared, "node", f.Node, "kind", f.Kind, "period_start", start, "period_end", end)
	}
}
