package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/testcell"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file judges the results of the external paths (host-external,
// pod-external), whose destination is an external target, apart from the
// node localisation: a target that fails from every node is the target's
// fault (or the way to it), one node that reaches no target while the
// others do is that node's (its egress).

// Kinds of findings about the external targets. The first four are about
// a target (Finding.Target set, Finding.Node ""), the last two about a
// node (Finding.Node set, Finding.Targets the targets it fails).
const (
	// KindExternalDown: every test to the target fails from every node
	// that measured it. For a target without http_url (ping only) this is
	// also what a target that drops ICMP looks like.
	KindExternalDown Kind = "external-down"
	// KindExternalHTTPDown: HTTP to the target fails from every node
	// that measured it, ping works: the address answers, the service
	// behind the URL does not.
	KindExternalHTTPDown Kind = "external-http-down"
	// KindExternalICMP: ping to the target fails from every node that
	// measured it, HTTP works: ICMP is dropped on the way or by the
	// target.
	KindExternalICMP Kind = "external-icmp-blocked"
	// KindExternalPartial: tests to the target fail from some of the
	// nodes (Finding.Sources), or from all of them on some paths or tests
	// only, in none of the patterns above.
	KindExternalPartial Kind = "external-partial"
	// KindEgress: every test of the node to every external target it
	// measured fails, while other nodes reach those targets: the node
	// cannot leave the cluster (its routes, firewall, or the targets'
	// refusing its IP).
	KindEgress Kind = "egress-broken"
	// KindPodEgress: the node's pod-external tests fail while its
	// host-external tests work and other nodes' pods reach the same
	// targets: the CNI's egress (SNAT, masquerade) on that node.
	KindPodEgress Kind = "pod-egress-broken"
)

// MinExternalSources is the fewest source nodes that must have measured a
// target for any finding about it or about a node's way to it: with one,
// a target that is down and a node that cannot reach it look the same.
const MinExternalSources = 2

// External reports whether the finding comes from the external paths'
// results: about a target (Target set), or a node's egress.
func (f Finding) External() bool {
	return f.Target != "" || f.Kind == KindEgress || f.Kind == KindPodEgress
}

// externalString is String for a finding about a target or a node's
// egress; ok is false for any other finding.
func (f Finding) externalString() (s string, ok bool) {
	example := ""
	if len(f.Bad) > 0 {
		example = f.Bad[0]
	}
	switch f.Kind {
	case KindExternalDown:
		return fmt.Sprintf("target %s: %s (every test fails from all %d nodes that measured it: %d of %d tests bad; e.g. %s)",
			f.Target, f.Kind, len(f.Sources), len(f.Bad), f.Of, example), true
	case KindExternalHTTPDown:
		return fmt.Sprintf("target %s: %s (HTTP fails from all %d nodes that measured it, ping works: %d of %d HTTP tests bad; e.g. %s)",
			f.Target, f.Kind, len(f.Sources), len(f.Bad), f.Of, example), true
	case KindExternalICMP:
		return fmt.Sprintf("target %s: %s (ping fails from all %d nodes that measured it, HTTP works: %d of %d ping tests bad; e.g. %s)",
			f.Target, f.Kind, len(f.Sources), len(f.Bad), f.Of, example), true
	case KindExternalPartial:
		return fmt.Sprintf("target %s: %s (fails from %s: %d of %d tests bad; e.g. %s)",
			f.Target, f.Kind, strings.Join(f.Sources, ", "), len(f.Bad), f.Of, example), true
	case KindEgress:
		return fmt.Sprintf("node %s: %s (%d of its %d tests to external targets bad; other nodes reach %s; e.g. %s)",
			f.Node, f.Kind, len(f.Bad), f.Of, strings.Join(f.Targets, ", "), example), true
	case KindPodEgress:
		return fmt.Sprintf("node %s: %s (%d of its %d pod-external tests bad, host-external works; other nodes' pods reach %s; e.g. %s)",
			f.Node, f.Kind, len(f.Bad), f.Of, strings.Join(f.Targets, ", "), example), true
	}
	return "", false
}

// diagnoseExternal judges the external paths' results, in three steps,
// each on what the steps before left unexplained:
//
//  1. A target whose ping, or HTTP, or both fail from every source node
//     that measured them (MinExternalSources or more) is named:
//     external-down, external-icmp-blocked, external-http-down.
//  2. A node whose every remaining test to the targets fails, while for
//     each of those targets another node has a test that passes, is named
//     egress-broken; one whose pod-external tests all fail while its
//     host-external tests all pass, and another node's pod reaches each of
//     those targets, pod-egress-broken.
//  3. A target with minBad or more remaining failed tests, measured by
//     MinExternalSources or more nodes, is named external-partial with
//     the nodes they failed from.
//
// Results of agents that did not take part (agent_unavailable), and of the
// nodes the node localisation named agent-gone or unreachable, are left
// out: their failures are no evidence about the way out of the cluster.
// Degradations (slow but working) are not judged.
func diagnoseExternal(results []*measurev1.Result, nodeFindings []Finding) []Finding {
	aside := map[string]bool{}
	for _, f := range nodeFindings {
		if f.Kind == KindAgentGone || f.Kind == KindUnreachable {
			aside[f.Node] = true
		}
	}
	obs := observeExternal(results, aside)
	explained := make([]bool, len(obs))
	findings := downTargets(obs, explained)
	findings = append(findings, brokenEgress(obs, explained)...)
	return append(findings, partialTargets(obs, explained)...)
}

// observeExternal turns results to external targets into one observation
// per source, target, path and test: failed when no result of it has a
// figure. Busy and canceled results (unmeasured), results of sources in
// aside, and observations whose results all say agent_unavailable are
// left out.
func observeExternal(results []*measurev1.Result, aside map[string]bool) []observation {
	var ext []*measurev1.Result
	for _, r := range results {
		src, dst := r.GetSrcNode(), r.GetDstNode()
		if src == "" || dst == "" || aside[src] || unmeasured(r.GetStatus()) {
			continue
		}
		ext = append(ext, r)
	}
	out := []observation{}
	for _, o := range observeCells(testcell.Cells(ext)).Groups() {
		if o.status != measurev1.Status_STATUS_AGENT_UNAVAILABLE {
			out = append(out, *o)
		}
	}
	return out
}

// downTargets is step 1 of diagnoseExternal: targets whose ping or HTTP
// (or every test) fails from every source; it marks what it names
// explained.
func downTargets(obs []observation, explained []bool) []Finding {
	var findings []Finding
	for _, target := range targetsOf(obs) {
		srcs := map[measurev1.Test]map[string]bool{}
		allFailed := map[measurev1.Test]bool{}
		for _, o := range obs {
			if o.dst != target {
				continue
			}
			if srcs[o.test] == nil {
				srcs[o.test], allFailed[o.test] = map[string]bool{}, true
			}
			srcs[o.test][o.src] = true
			allFailed[o.test] = allFailed[o.test] && o.failed
		}
		down := map[measurev1.Test]bool{}
		for t := range srcs {
			if allFailed[t] && len(srcs[t]) >= MinExternalSources {
				down[t] = true
			}
		}
		var kind Kind
		switch {
		case len(down) == 0:
			continue
		case len(down) == len(srcs):
			kind = KindExternalDown
		case len(down) == 1 && down[measurev1.Test_TEST_HTTP]:
			kind = KindExternalHTTPDown
		case len(down) == 1 && down[measurev1.Test_TEST_PING]:
			kind = KindExternalICMP
		default: // some other mix (no such tests on external paths today)
			continue
		}
		f := Finding{Target: target, Kind: kind}
		sources := map[string]bool{}
		var bad []observation
		for i, o := range obs {
			if o.dst == target && down[o.test] {
				explained[i] = true
				bad = append(bad, o)
				sources[o.src] = true
			}
		}
		f.Bad, f.Of, f.Sources = strs(bad), len(bad), slices.Sorted(maps.Keys(sources))
		findings = append(findings, f)
	}
	return findings
}

// brokenEgress is step 2 of diagnoseExternal: nodes that reach no target,
// or none from their pod, while other nodes do; it marks what it names
// explained.
func brokenEgress(obs []observation, explained []bool) []Finding {
	// reach[target][path] are the sources with a passing test to target on
	// path, among what step 1 left.
	reach := map[string]map[measurev1.Path]map[string]bool{}
	bySrc := map[string][]int{}
	for i, o := range obs {
		if explained[i] {
			continue
		}
		bySrc[o.src] = append(bySrc[o.src], i)
		if o.failed {
			continue
		}
		if reach[o.dst] == nil {
			reach[o.dst] = map[measurev1.Path]map[string]bool{}
		}
		if reach[o.dst][o.path] == nil {
			reach[o.dst][o.path] = map[string]bool{}
		}
		reach[o.dst][o.path][o.src] = true
	}
	// reachedByOther: another source than src passes a test to target, on
	// any path, or on path only.
	reachedByOther := func(target, src string, path measurev1.Path) bool {
		for p, srcs := range reach[target] {
			if path != measurev1.Path_PATH_UNSPECIFIED && p != path {
				continue
			}
			for s := range srcs {
				if s != src {
					return true
				}
			}
		}
		return false
	}
	var findings []Finding
	for _, src := range slices.Sorted(maps.Keys(bySrc)) {
		idx := bySrc[src]
		var pod, host []int
		allFailed, podFailed, hostPassed := true, true, true
		for _, i := range idx {
			o := obs[i]
			allFailed = allFailed && o.failed
			if o.path == measurev1.Path_PATH_POD_TO_EXTERNAL {
				pod = append(pod, i)
				podFailed = podFailed && o.failed
			} else {
				host = append(host, i)
				hostPassed = hostPassed && !o.failed
			}
		}
		var kind Kind
		var named []int
		var path measurev1.Path // the path on which others must reach the targets
		switch {
		case allFailed:
			kind, named = KindEgress, idx
		case len(pod) > 0 && podFailed && len(host) > 0 && hostPassed:
			kind, named, path = KindPodEgress, pod, measurev1.Path_PATH_POD_TO_EXTERNAL
		default:
			continue
		}
		targets := map[string]bool{}
		for _, i := range named {
			targets[obs[i].dst] = true
		}
		others := true
		for t := range targets {
			others = others && reachedByOther(t, src, path)
		}
		if !others {
			continue
		}
		bad := make([]observation, len(named))
		for k, i := range named {
			explained[i] = true
			bad[k] = obs[i]
		}
		findings = append(findings, Finding{Node: src, Kind: kind, Targets: slices.Sorted(maps.Keys(targets)), Bad: strs(bad), Of: len(named)})
	}
	return findings
}

// partialTargets is step 3 of diagnoseExternal: targets with failed tests
// that steps 1 and 2 did not explain.
func partialTargets(obs []observation, explained []bool) []Finding {
	var findings []Finding
	for _, target := range targetsOf(obs) {
		measuredBy := map[string]bool{}
		failedFrom := map[string]bool{}
		var bad []observation
		of := 0
		for i, o := range obs {
			if o.dst != target {
				continue
			}
			measuredBy[o.src] = true
			if explained[i] {
				continue
			}
			of++
			if o.failed {
				bad = append(bad, o)
				failedFrom[o.src] = true
			}
		}
		if len(measuredBy) < MinExternalSources || len(bad) < minBad {
			continue
		}
		findings = append(findings, Finding{Target: target, Kind: KindExternalPartial, Sources: slices.Sorted(maps.Keys(failedFrom)), Bad: strs(bad), Of: of})
	}
	return findings
}

// targetsOf returns the targets of obs, sorted.
func targetsOf(obs []observation) []string {
	set := map[string]bool{}
	for _, o := range obs {
		set[o.dst] = true
	}
	return slices.Sorted(maps.Keys(set))
}
