package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/internal/tick"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// This file holds how the faults demo reads the coordinator's probe judge
// (coordinator/probes.go judgeProbes) from its log: the periods it
// judged and the faults it localised and cleared in them.

// judgeEvent is one line of the probe judge's in the coordinator's log.
type judgeEvent struct {
	at         time.Time // when it was logged
	msg        string    // "probe period judged", "probe fault localised" or "probe fault cleared"
	node       string
	kind       diagnose.Kind
	start, end time.Time // the report period judged
	line       string
}

// judgeMsgs are the probe judge's messages the demo reads.
var judgeMsgs = []string{diagnose.LogPeriodJudged, diagnose.LogFaultLocalised, diagnose.LogFaultCleared}

// judgeLog returns the probe judge's lines of the coordinator's log
// logged at or after from, in order.
func (d *faultsDemo) judgeLog(from time.Time) ([]judgeEvent, error) {
	b, err := os.ReadFile(d.c.LogPath("coordinator"))
	if err != nil {
		return nil, err
	}
	var out []judgeEvent
	for _, line := range strings.Split(string(b), "\n") {
		var msg string
		for _, m := range judgeMsgs {
			if strings.Contains(line, `msg="`+m+`"`) {
				msg = m
			}
		}
		if msg == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, logField(line, "time"))
		if err != nil || at.Before(from) {
			continue
		}
		e := judgeEvent{at: at, msg: msg, node: logField(line, "node"), kind: diagnose.Kind(logField(line, "kind")), line: line}
		e.start, _ = time.Parse(time.RFC3339Nano, logField(line, "period_start"))
		if e.end, err = time.Parse(time.RFC3339Nano, logField(line, "period_end")); err != nil {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// logField returns an unquoted key=value's value of a log line ("" if
// absent); values with spaces are not read.
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if strings.HasPrefix(line, key+"=") {
		i = -1
	} else if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	v, _, _ = strings.Cut(v, " ")
	return v
}

// probeDeadline is the end of the report period that holds t+interval:
// a fault in place from t on is in the whole of that period (the one
// after the period holding t, or that period itself when t is at its
// start), so the judge must name it in that period at the latest.
func (d *faultsDemo) probeDeadline(t time.Time) time.Time {
	i := d.probeInterval()
	return t.Add(i).Truncate(i).Add(i)
}

// waitJudged waits until the probe judge has judged a period ending at or
// after end, at most until end plus the judge's grace and two intervals.
// It returns the judge's lines from `from` on.
func (d *faultsDemo) waitJudged(ctx context.Context, from, end time.Time) ([]judgeEvent, error) {
	limit := end.Add(d.judgeGrace() + 2*d.probeInterval())
	for {
		evs, err := d.judgeLog(from)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.msg == diagnose.LogPeriodJudged && !e.end.Before(end) {
				return evs, nil
			}
		}
		if time.Now().After(limit) {
			return evs, fmt.Errorf("the probe judge judged no period ending at %s or later by %s", end.Format(time.TimeOnly), limit.Format(time.TimeOnly))
		}
		if err := tick.Sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
}

// judgeGrace is the coordinator's wait for a period's last reports
// (coordinator/probes.go judgeGrace): 1 s, the probe timeout, 1 s.
func (d *faultsDemo) judgeGrace() time.Duration {
	return 2*time.Second + min(2*time.Second, d.probeInterval()/2)
}

// published returns the faults the probe judge holds after evs, by node.
func published(evs []judgeEvent) map[string]diagnose.Kind {
	out := map[string]diagnose.Kind{}
	for _, e := range evs {
		switch e.msg {
		case diagnose.LogFaultLocalised:
			out[e.node] = e.kind
		case diagnose.LogFaultCleared:
			delete(out, e.node)
		}
	}
	return out
}

// waitQuiet waits, after a fault was cleared at cleared, until the probe
// judge has judged a whole period after it and holds no fault, at most six
// intervals plus its grace. It returns whether it got there and the
// judge's lines from `from` on.
func (d *faultsDemo) waitQuiet(ctx context.Context, from, cleared time.Time) (bool, []judgeEvent, error) {
	i := d.probeInterval()
	first := cleared.Truncate(i).Add(2 * i) // the first whole period after the clear ends then
	limit := first.Add(d.judgeGrace() + 6*i)
	for {
		evs, err := d.judgeLog(from)
		if err != nil {
			return false, nil, err
		}
		judged := false
		for _, e := range evs {
			judged = judged || e.msg == diagnose.LogPeriodJudged && !e.end.Before(first)
		}
		if judged && len(published(evs)) == 0 {
			return true, evs, nil
		}
		if time.Now().After(limit) {
			return false, evs, nil
		}
		if err := tick.Sleep(ctx, pollEvery); err != nil {
			return false, nil, err
		}
	}
}

// probeVerdict is what the probe judge said of one scenario.
type probeVerdict struct {
	// hit is the first "probe fault localised" of the scenario's node in
	// time (a period ending at the deadline at the latest), kind is its
	// kind; zero when none.
	hit judgeEvent
	// localised: hit names the scenario's kind.
	localised bool
	// alarms are the faults localised on other nodes, or of other kinds,
	// and the faults still held once the scenario was over.
	alarms []string
}

// judgeScenario reads evs (from the fault on) for scenario s injected at
// t0, whose fault must be named by the period ending at deadline.
func judgeScenario(evs []judgeEvent, s faultScenario, t0, deadline time.Time, quiet bool) probeVerdict {
	var v probeVerdict
	for _, e := range evs {
		if e.msg != diagnose.LogFaultLocalised {
			continue
		}
		right := s.node != "" && e.node == s.node
		switch {
		case right && e.kind == s.kind && !e.end.After(deadline):
			if v.hit.msg == "" || !v.localised {
				v.hit, v.localised = e, true
			}
			continue
		case right && e.kind == s.kind:
			continue // late: the hit is missing, no false alarm
		case right && v.hit.msg == "" && !e.end.After(deadline):
			v.hit = e
		}
		v.alarms = append(v.alarms, fmt.Sprintf("%s on %s in the period ending %s", e.kind, e.node, e.end.Format(time.TimeOnly)))
	}
	if !quiet {
		for node, kind := range published(evs) {
			v.alarms = append(v.alarms, fmt.Sprintf("%s on %s still held after the fault was cleared", kind, node))
		}
	}
	return v
}

// reportsKept checks that the coordinator stored the agents' report
// periods once: from `from` to `gapTo` (both on period boundaries; the
// periods the agents spooled while the coordinator was down) each node's
// periods, as its series to the other nodes (host-host and pod-pod, every
// kind) hold them, follow each other with no gap (no report lost), and
// up to `to` no series holds a period twice or overlapping (no report
// stored twice). A period counts when any of the node's series holds it.
// After gapTo a gap is no report lost: the restarted coordinator rebuilds
// its plans as agents register again, and an agent that registers before
// its peers is given none to probe for a while. It returns what it found,
// and whether that is so.
func (d *faultsDemo) reportsKept(ctx context.Context, from, gapTo, to time.Time) (string, bool, error) {
	var bad []string
	reports := 0
	for _, src := range d.l.Nodes {
		ends := map[int64]int64{} // period start -> end, Unix ns, over the node's series
		for _, dst := range d.l.Nodes {
			if src.Name == dst.Name {
				continue
			}
			for _, path := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD} {
				for _, kind := range []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU,
					measurev1.ProbeKind_PROBE_KIND_TCP, measurev1.ProbeKind_PROBE_KIND_HTTP} {
					resp, err := d.client.ListProbeSeries(ctx, &meshv1.ListProbeSeriesRequest{SrcNode: src.Name, DstNode: dst.Name,
						Path: path, Kind: kind, StartTime: timestamppb.New(from), EndTime: timestamppb.New(to)})
					if err != nil {
						return "", false, fmt.Errorf("list probe series %s->%s: %w", src.Name, dst.Name, err)
					}
					var prevEnd int64
					for _, sm := range resp.GetSamples() {
						start := sm.GetPeriodStart().AsTime().UnixNano()
						if start < prevEnd {
							bad = append(bad, fmt.Sprintf("%s->%s %s %s: the period at %s stored twice or overlapping", src.Name, dst.Name,
								path, kind, sm.GetPeriodStart().AsTime().Format(time.TimeOnly)))
						}
						prevEnd = start + sm.GetPeriod().AsDuration().Nanoseconds()
						ends[start] = prevEnd
					}
				}
			}
		}
		reports += len(ends)
		at, stop := from.UnixNano(), gapTo.UnixNano()
		for s, e := range ends { // a period holding from
			if s < at && e > at {
				at = e
			}
		}
		for at < stop {
			end, ok := ends[at]
			if !ok {
				next := stop
				for s := range ends {
					if s > at && s < next {
						next = s
					}
				}
				bad = append(bad, fmt.Sprintf("%s: no report of %s to %s", src.Name, time.Unix(0, at).UTC().Format(time.TimeOnly),
					time.Unix(0, next).UTC().Format(time.TimeOnly)))
				at = next
				continue
			}
			at = end
		}
	}
	if len(bad) > 0 {
		return fmt.Sprintf("%d reports: %s", reports, strings.Join(bad, "; ")), false, nil
	}
	return fmt.Sprintf("%d nodes x %d report periods from %s to %s stored, none twice; none lost from %s to the restart at %s",
		len(d.l.Nodes), reports/len(d.l.Nodes), from.UTC().Format(time.TimeOnly), to.UTC().Format(time.TimeOnly),
		from.UTC().Format(time.TimeOnly), gapTo.UTC().Format(time.TimeOnly)), true, nil
}
