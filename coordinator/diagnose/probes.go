package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Thresholds of the probe judge: a node is implicated on a path and probe
// kind when at least ProbeBadShare of the summaries of pairs it is in are
// bad (a loss or a failure) while at most ProbeOthersShare of the other
// pairs' are.
const (
	ProbeBadShare    = 0.5
	ProbeOthersShare = 0.25
	// probeExamples bounds the bad summaries a finding quotes.
	probeExamples = 3
	// minLatencySummaries is the fewest answered summaries, of the node's
	// pairs and of the others, that a latency verdict is taken on: one
	// slow probe among a handful is noise.
	minLatencySummaries = 10
)

// ProbeJudge localises faults in the continuous mesh's reports, one
// window (a report interval) at a time: Add takes every checked summary as
// it arrives, Judge closes the window. It keeps counters per node, path
// and kind, never the summaries: Add is O(1) and Judge O(nodes x paths x
// kinds), so a window of a 1,000-node mesh is judged in well under its
// length. It is safe for concurrent use.
type ProbeJudge struct {
	mu     sync.Mutex
	nodes  map[probeKey]*probeAgg // pairs the node is in, as source or destination
	global map[pathKind]*probeAgg // every pair
}

type pathKind struct {
	path measurev1.Path
	kind agentv1.ProbeKind
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

// NewProbeJudge returns a judge with an empty window.
func NewProbeJudge() *ProbeJudge {
	return &ProbeJudge{nodes: map[probeKey]*probeAgg{}, global: map[pathKind]*probeAgg{}}
}

// Add counts one summary of src's report (checked: coordinator/ingest) in
// the current window.
func (j *ProbeJudge) Add(src string, s *agentv1.ProbeSummary) {
	dst := s.GetNode()
	if dst == "" || s.GetSent() == 0 {
		return
	}
	pk := pathKind{s.GetPath(), s.GetKind()}
	bad := s.GetReceived() < s.GetSent()
	var example string
	if bad {
		example = fmt.Sprintf("%s->%s %s %s: %d of %d lost", src, dst, testspec.PathName(pk.path), ProbeKindName(pk.kind),
			s.GetSent()-s.GetReceived(), s.GetSent())
		if m := s.GetMessage(); m != "" {
			example += " (" + m + ")"
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, a := range []*probeAgg{j.agg(probeKey{src, pk}), j.agg(probeKey{dst, pk}), j.globalAgg(pk)} {
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

func (j *ProbeJudge) agg(k probeKey) *probeAgg {
	a := j.nodes[k]
	if a == nil {
		a = &probeAgg{}
		j.nodes[k] = a
	}
	return a
}

func (j *ProbeJudge) globalAgg(pk pathKind) *probeAgg {
	a := j.global[pk]
	if a == nil {
		a = &probeAgg{}
		j.global[pk] = a
	}
	return a
}

// ProbeKindName is a probe kind's config name: icmp, icmp_mtu, tcp, http.
func ProbeKindName(k agentv1.ProbeKind) string {
	return strings.TrimPrefix(strings.ToLower(k.String()), "probe_kind_")
}

// Judge closes the window: it names, per node, the kind of fault its
// pairs' summaries point to, and starts a new, empty window. A node is
// implicated on a path and kind (see ProbeBadShare); then, in this order:
// every kind fails on host-host: unreachable; icmp_mtu fails on a path
// where icmp and tcp do not: mtu-blackhole; icmp fails where tcp on the
// same path does not: icmp-blocked; tcp fails on host-host where icmp
// does not (the node answers, its agent's responders do not): agent-gone;
// a pod path fails where host-host on the same kind does not:
// pod-network; other failures: unreachable. A node with no failure
// whose pairs' mean median RTT on a path and kind is LatencyRatio times
// the other pairs' and MinLatencyIncrease more, over at least 10 answered
// summaries of each, is latency-degraded. Findings
// are sorted by node.
func (j *ProbeJudge) Judge() []Finding {
	j.mu.Lock()
	nodes, global := j.nodes, j.global
	j.nodes, j.global = map[probeKey]*probeAgg{}, map[pathKind]*probeAgg{}
	j.mu.Unlock()

	type verdict struct {
		bad map[pathKind]*probeAgg
		of  int
	}
	per := map[string]*verdict{}
	slow := map[string]*probeAgg{}
	for k, a := range nodes {
		g := global[k.pk]
		v := per[k.node]
		if v == nil {
			v = &verdict{bad: map[pathKind]*probeAgg{}}
			per[k.node] = v
		}
		v.of += a.total
		othersTotal, othersBad := g.total-a.total, g.bad-a.bad
		share := float64(a.bad) / float64(a.total)
		othersShare := 0.0
		if othersTotal > 0 {
			othersShare = float64(othersBad) / float64(othersTotal)
		}
		// Without pairs that leave the node out (a mesh of two), nothing
		// tells the node from its peer.
		if a.total >= 2 && othersTotal > 0 && share >= ProbeBadShare && othersShare <= ProbeOthersShare {
			v.bad[k.pk] = a
			continue
		}
		if a.rttN >= minLatencySummaries && g.rttN-a.rttN >= minLatencySummaries {
			mine := a.rttSum / float64(a.rttN)
			others := (g.rttSum - a.rttSum) / float64(g.rttN-a.rttN)
			if mine >= LatencyRatio*others && mine-others >= MinLatencyIncrease {
				slow[k.node] = a
			}
		}
	}
	var out []Finding
	for node, v := range per {
		if len(v.bad) == 0 {
			if a, ok := slow[node]; ok {
				out = append(out, Finding{Node: node, Kind: KindLatency, Of: v.of,
					Bad: []string{fmt.Sprintf("mean median RTT %.3g ms on the pairs with %s", 1000*a.rttSum/float64(a.rttN), node)}})
			}
			continue
		}
		f := Finding{Node: node, Kind: probeKind(v.bad, global), Of: v.of}
		keys := make([]pathKind, 0, len(v.bad))
		for pk := range v.bad {
			keys = append(keys, pk)
		}
		slices.SortFunc(keys, func(a, b pathKind) int { return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.kind, b.kind)) })
		for _, pk := range keys {
			f.Bad = append(f.Bad, v.bad[pk].examples...)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Finding) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// probeKind reads the kind of fault from the paths and kinds a node is
// implicated on (bad) among those probed (global).
func probeKind(bad map[pathKind]*probeAgg, global map[pathKind]*probeAgg) Kind {
	isBad := func(path measurev1.Path, kind agentv1.ProbeKind) bool { _, ok := bad[pathKind{path, kind}]; return ok }
	probed := func(path measurev1.Path, kind agentv1.ProbeKind) bool {
		_, ok := global[pathKind{path, kind}]
		return ok
	}
	hh := measurev1.Path_PATH_HOST_TO_HOST
	allHost := true
	anyHost := false
	for pk := range global {
		if pk.path == hh {
			anyHost = true
			if !isBad(hh, pk.kind) {
				allHost = false
			}
		}
	}
	if anyHost && allHost {
		return KindUnreachable
	}
	icmp, mtu, tcp := agentv1.ProbeKind_PROBE_KIND_ICMP, agentv1.ProbeKind_PROBE_KIND_ICMP_MTU, agentv1.ProbeKind_PROBE_KIND_TCP
	for pk := range bad { // only the full-size echo is lost: large packets vanish
		if pk.kind == mtu && probed(pk.path, icmp) && !isBad(pk.path, icmp) && !isBad(pk.path, tcp) {
			return KindMTU
		}
	}
	for pk := range bad {
		if pk.kind == icmp && probed(pk.path, tcp) && !isBad(pk.path, tcp) {
			return KindICMP
		}
	}
	// The node answers pings but not its agent's responders.
	if isBad(hh, tcp) && probed(hh, icmp) && !isBad(hh, icmp) {
		return KindAgentGone
	}
	for pk := range bad {
		if pk.path != hh && !isBad(hh, pk.kind) && probed(hh, pk.kind) && podPath(pk.path) {
			return KindPodNetwork
		}
	}
	return KindUnreachable
}

// podPath reports whether a path goes from or to a pod (or a ClusterIP
// in front of one).
func podPath(p measurev1.Path) bool {
	switch p {
	case measurev1.Path_PATH_HOST_TO_POD, measurev1.Path_PATH_POD_TO_POD, measurev1.Path_PATH_POD_TO_SERVICE, measurev1.Path_PATH_HOST_TO_SERVICE:
		return true
	}
	return false
}
