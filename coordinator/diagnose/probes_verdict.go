package diagnose

import (
	"cmp"
	"fmt"
	"slices"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// probeState is what a node's summaries on one path and kind say.
type probeState int

const (
	probeUnprobed probeState = iota
	probeClean               // at most ProbeCleanShare bad
	probeMixed               // between clean and implicated
	probeBad                 // implicated (ProbeBadShare, ProbeOthersShare)
)

// nodeProbes is one node's states in a window.
type nodeProbes struct {
	state map[pathKind]probeState
	bad   map[pathKind]*probeAgg
	of    int
	// full: every implicated path and kind is bad on ProbeSettledShare of
	// the node's summaries.
	full bool
}

func (n *nodeProbes) is(path measurev1.Path, kind measurev1.ProbeKind, s probeState) bool {
	return n.state[pathKind{path, kind}] == s
}

// verdicts names, per node, the kind of fault its pairs' summaries point
// to in the window, sorted by node, and whether each is settled. A node
// is implicated on a path and kind (see ProbeBadShare); then, in this
// order: every kind fails on host-host: unreachable; icmp_mtu fails on a
// path where icmp and tcp are clean: mtu-blackhole; icmp fails where tcp
// on the same path is clean: icmp-blocked; tcp fails on host-host where
// icmp is clean (the node answers, its agent's responders do not):
// agent-gone; a pod path fails where host-host on the same kind is clean:
// pod-network; other failures: unreachable. A verdict is settled when the
// node's every implicated path and kind is bad on ProbeSettledShare of its
// summaries and none is mixed (see ProbeCleanShare). A node with no
// failure whose pairs' mean median RTT on a path and kind is LatencyRatio
// times the other pairs' and MinLatencyIncrease more, over at least 10
// answered summaries of each, is latency-degraded, never settled.
func (w *probeWindow) verdicts() ([]Finding, []bool) {
	per := map[string]*nodeProbes{}
	slow := map[string]*probeAgg{}
	for k, a := range w.nodes {
		g := w.global[k.pk]
		n := per[k.node]
		if n == nil {
			n = &nodeProbes{state: map[pathKind]probeState{}, bad: map[pathKind]*probeAgg{}, full: true}
			per[k.node] = n
		}
		n.of += a.total
		othersTotal, othersBad := g.total-a.total, g.bad-a.bad
		share := float64(a.bad) / float64(a.total)
		othersShare := 0.0
		if othersTotal > 0 {
			othersShare = float64(othersBad) / float64(othersTotal)
		}
		switch {
		// Without pairs that leave the node out (a mesh of two), nothing
		// tells the node from its peer.
		case a.total >= 2 && othersTotal > 0 && share >= ProbeBadShare && othersShare <= ProbeOthersShare:
			n.state[k.pk] = probeBad
			n.bad[k.pk] = a
			n.full = n.full && share >= ProbeSettledShare
			continue
		case share <= ProbeCleanShare:
			n.state[k.pk] = probeClean
		default:
			n.state[k.pk] = probeMixed
			n.full = false
		}
		if a.rttN >= minLatencySummaries && g.rttN-a.rttN >= minLatencySummaries {
			mine := a.rttSum / float64(a.rttN)
			others := (g.rttSum - a.rttSum) / float64(g.rttN-a.rttN)
			if mine >= LatencyRatio*others && mine-others >= MinLatencyIncrease {
				slow[k.node] = a
			}
		}
	}
	nodes := make([]string, 0, len(per))
	for node := range per {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes)
	var out []Finding
	var settled []bool
	for _, node := range nodes {
		n := per[node]
		if len(n.bad) == 0 {
			if a, ok := slow[node]; ok {
				out = append(out, Finding{Node: node, Kind: KindLatency, Of: n.of,
					Bad: []string{fmt.Sprintf("mean median RTT %.3g ms on the pairs with %s", 1000*a.rttSum/float64(a.rttN), node)}})
				settled = append(settled, false)
			}
			continue
		}
		f := Finding{Node: node, Kind: n.kind(w.global), Of: n.of}
		keys := make([]pathKind, 0, len(n.bad))
		for pk := range n.bad {
			keys = append(keys, pk)
		}
		slices.SortFunc(keys, func(a, b pathKind) int { return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.kind, b.kind)) })
		for _, pk := range keys {
			f.Bad = append(f.Bad, n.bad[pk].examples...)
		}
		out = append(out, f)
		settled = append(settled, n.full)
	}
	return out, settled
}

// kind reads the kind of fault from the paths and kinds the node is
// implicated on among those probed (global).
func (n *nodeProbes) kind(global map[pathKind]*probeAgg) Kind {
	hh := measurev1.Path_PATH_HOST_TO_HOST
	allHost, anyHost := true, false
	for pk := range global {
		if pk.path == hh {
			anyHost = true
			allHost = allHost && n.is(hh, pk.kind, probeBad)
		}
	}
	if anyHost && allHost {
		return KindUnreachable
	}
	icmp, mtu, tcp := measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, measurev1.ProbeKind_PROBE_KIND_TCP
	bad := make([]pathKind, 0, len(n.bad))
	for pk := range n.bad {
		bad = append(bad, pk)
	}
	slices.SortFunc(bad, func(a, b pathKind) int { return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.kind, b.kind)) })
	for _, pk := range bad { // only the full-size echo is lost: large packets vanish
		if pk.kind == mtu && n.is(pk.path, icmp, probeClean) && n.is(pk.path, tcp, probeClean) {
			return KindMTU
		}
	}
	for _, pk := range bad {
		if pk.kind == icmp && n.is(pk.path, tcp, probeClean) {
			return KindICMP
		}
	}
	// The node answers pings but not its agent's responders.
	if n.is(hh, tcp, probeBad) && n.is(hh, icmp, probeClean) {
		return KindAgentGone
	}
	for _, pk := range bad {
		if pk.path != hh && podPath(pk.path) && n.is(hh, pk.kind, probeClean) {
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
