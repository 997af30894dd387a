// Package diagnose localises faults from a run's results: which node the
// failed or degraded node pairs have in common, and what kind of fault the
// evidence points to. A fault on one node breaks or slows every pair that
// node is in, as client or server, and no other: so the node that explains
// most bad pairs, far more than chance, is named. Failures (no number at
// all) and degradations (a figure far from the other pairs' on the same
// test and path) are weighed apart, and the kind of fault is read from
// which tests and paths suffer (only ping: ICMP dropped; only bulk
// transfers: an MTU black hole; only pod paths: the CNI; everything on the
// node: its agent is gone).
package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Kind is what a finding points to.
type Kind string

// Kinds of findings.
const (
	// KindAgentGone: the node's agent did not take part (agent_unavailable).
	KindAgentGone Kind = "agent-gone"
	// KindPodNetwork: pod paths to or from the node fail, host paths work.
	KindPodNetwork Kind = "pod-network"
	// KindICMP: ping to or from the node fails while TCP works.
	KindICMP Kind = "icmp-blocked"
	// KindMTU: bulk transfers through the node fail while small probes
	// pass: packets above some size vanish (an MTU black hole).
	KindMTU Kind = "mtu-blackhole"
	// KindUnreachable: every test to or from the node fails.
	KindUnreachable Kind = "unreachable"
	// KindSlow: throughput through the node is far below the other pairs'.
	KindSlow Kind = "bandwidth-degraded"
	// KindLatency: latency through the node is far above the other pairs'.
	KindLatency Kind = "latency-degraded"
)

// Thresholds of a degradation: a pair-path's median throughput below
// SlowRatio of the other pairs' median, or its latency above LatencyRatio
// times theirs.
const (
	SlowRatio    = 0.5
	LatencyRatio = 3.0
)

// Finding is one localised fault.
type Finding struct {
	// Node is the node the bad pairs have in common.
	Node string `json:"node"`
	// Kind is what the evidence points to.
	Kind Kind `json:"kind"`
	// Bad lists the bad pair-path-tests the node explains, e.g.
	// "node-1->node-2 pod-pod iperf3_tcp: timeout".
	Bad []string `json:"bad"`
	// Of is how many pair-path-tests involving Node were measured on the
	// tests and paths that went bad.
	Of int `json:"of"`
}

// String is the finding in one line.
func (f Finding) String() string {
	return fmt.Sprintf("node %s: %s (%d of its %d pair tests bad; e.g. %s)", f.Node, f.Kind, len(f.Bad), f.Of, f.Bad[0])
}

// observation is one pair-path-test of the run, good or bad.
type observation struct {
	src, dst string
	path     measurev1.Path
	test     measurev1.Test
	failed   bool // no figure: every result failed
	status   measurev1.Status
	degraded bool // a figure far from the other pairs'
	note     string
}

func (o observation) bad() bool { return o.failed || o.degraded }

func (o observation) involves(n string) bool { return o.src == n || o.dst == n }

func (o observation) String() string {
	return fmt.Sprintf("%s->%s %s %s: %s", o.src, o.dst, testspec.PathName(o.path), testspec.Name(o.test), o.note)
}

// Diagnose localises the faults in a run's results. A node is named when
// at least minBad of the bad pair-path-tests involve it, they are at least
// half of its pair-path-tests on the tests and paths that went bad, and it
// explains more of them than any other node; its pairs are then set aside
// and the search goes on. Localising needs 3 nodes or more: with 2, both
// explain everything. Busy results are ignored (retried, never a sample).
func Diagnose(results []*measurev1.Result) []Finding {
	obs := observe(results)
	var findings []Finding
	for {
		node, bad, of := bestSuspect(obs)
		if node == "" {
			break
		}
		findings = append(findings, Finding{Node: node, Kind: kindOf(bad, obs, node), Bad: strs(bad), Of: of})
		// Set the node's pairs aside: its fault explains them.
		rest := obs[:0]
		for _, o := range obs {
			if !o.involves(node) {
				rest = append(rest, o)
			}
		}
		obs = rest
	}
	return findings
}

// minBad is the fewest bad pair-path-tests that name a node: with 3 nodes
// a node is in 4 ordered pairs.
const minBad = 2

func bestSuspect(obs []observation) (node string, bad []observation, of int) {
	// Only the tests and paths that went bad somewhere count: a fault that
	// breaks bulk transfers leaves the node's pings fine.
	type tp struct {
		test measurev1.Test
		path measurev1.Path
	}
	badKinds := map[tp]bool{}
	for _, o := range obs {
		if o.bad() {
			badKinds[tp{o.test, o.path}] = true
		}
	}
	byNode := map[string][]observation{}
	total := map[string]int{}
	for _, o := range obs {
		if !badKinds[tp{o.test, o.path}] {
			continue
		}
		for _, n := range []string{o.src, o.dst} {
			total[n]++
			if o.bad() {
				byNode[n] = append(byNode[n], o)
			}
		}
	}
	var nodes []string
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b string) int {
		return cmp.Or(-cmp.Compare(len(byNode[a]), len(byNode[b])), cmp.Compare(a, b))
	})
	if len(nodes) == 0 {
		return "", nil, 0
	}
	n := nodes[0]
	// The best must explain more than the runner-up: with a fault on one
	// node, its peers each explain only their own pair with it.
	tied := len(nodes) > 1 && len(byNode[nodes[1]]) == len(byNode[n])
	if len(byNode[n]) < minBad || 2*len(byNode[n]) < total[n] || tied {
		return "", nil, 0
	}
	return n, byNode[n], total[n]
}

// kindOf reads the kind of fault from which tests and paths went bad.
func kindOf(bad, all []observation, node string) Kind {
	var agentGone, failedAll, slow, latency int
	tests, paths := map[measurev1.Test]bool{}, map[measurev1.Path]bool{}
	for _, o := range bad {
		switch {
		case o.status == measurev1.Status_STATUS_AGENT_UNAVAILABLE:
			agentGone++
		case o.failed:
			failedAll++
		case o.degraded && report.HigherIsBetter(o.test):
			slow++
		case o.degraded:
			latency++
		}
		tests[o.test], paths[o.path] = true, true
	}
	// What still works on the node's pairs tells the kind apart.
	goodTests, goodPaths := map[measurev1.Test]bool{}, map[measurev1.Path]bool{}
	for _, o := range all {
		if o.involves(node) && !o.bad() {
			goodTests[o.test], goodPaths[o.path] = true, true
		}
	}
	onlyPod := true
	for p := range paths {
		onlyPod = onlyPod && (p == measurev1.Path_PATH_POD_TO_POD || p == measurev1.Path_PATH_POD_TO_SERVICE)
	}
	onlyPing := len(tests) == 1 && tests[measurev1.Test_TEST_PING]
	onlyBulk := true
	for t := range tests {
		onlyBulk = onlyBulk && report.HigherIsBetter(t)
	}
	switch {
	case agentGone > failedAll+slow+latency:
		return KindAgentGone
	case failedAll > 0 && onlyPing && len(goodTests) > 0:
		return KindICMP
	case failedAll > 0 && onlyPod && goodPaths[measurev1.Path_PATH_HOST_TO_HOST]:
		return KindPodNetwork
	case failedAll > 0 && onlyBulk && (goodTests[measurev1.Test_TEST_PING] || goodTests[measurev1.Test_TEST_QPERF_TCP_LAT]):
		return KindMTU
	case failedAll > 0:
		return KindUnreachable
	case slow >= latency:
		return KindSlow
	}
	return KindLatency
}

// observe turns results into one observation per pair, path and test:
// failed when no result of it has a figure; degraded when its median is
// far from the median of the other pairs on the same test, parameters and
// path.
func observe(results []*measurev1.Result) []observation {
	var clean []*measurev1.Result
	for _, r := range results {
		if r.GetStatus() != measurev1.Status_STATUS_BUSY {
			clean = append(clean, r)
		}
	}
	type key struct {
		src, dst string
		path     measurev1.Path
		test     measurev1.Test
	}
	cells := report.Cells(clean)
	byKey := map[key]*observation{}
	var order []key
	for _, c := range cells {
		k := key{c.Src, c.Dst, c.Path, c.Test}
		o := byKey[k]
		if o == nil {
			o = &observation{src: c.Src, dst: c.Dst, path: c.Path, test: c.Test}
			byKey[k] = o
			order = append(order, k)
		}
		if len(c.Samples) == 0 {
			o.failed, o.status = true, worstStatus(c.Failed)
			o.note = report.StatusName(o.status)
		}
	}
	// Degradations: per test, parameters and path, a node whose pairs
	// measure far worse than the pairs it is not in. (Against all other
	// pairs it would not show: in a small cluster most pairs involve any
	// given node.)
	for _, m := range report.Matrices(cells) {
		for _, n := range m.Nodes {
			var in, out []float64
			for src, row := range m.Cells {
				for dst, c := range row {
					if len(c.Samples) == 0 {
						continue
					}
					if src == n || dst == n {
						in = append(in, c.Stats.Median)
					} else {
						out = append(out, c.Stats.Median)
					}
				}
			}
			if len(in) == 0 || len(out) == 0 {
				continue
			}
			ref := median(out)
			for src, row := range m.Cells {
				for dst, c := range row {
					if len(c.Samples) == 0 || src != n && dst != n {
						continue
					}
					v := c.Stats.Median
					if report.HigherIsBetter(c.Test) && v < SlowRatio*ref || !report.HigherIsBetter(c.Test) && v > LatencyRatio*ref {
						o := byKey[key{c.Src, c.Dst, c.Path, c.Test}]
						o.degraded = true
						o.note = fmt.Sprintf("%s against %s on pairs without %s", report.FormatHeadline(c.Test, v), report.FormatHeadline(c.Test, ref), n)
					}
				}
			}
		}
	}
	out := make([]observation, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// worstStatus picks the most frequent failure status (ties by enum order).
func worstStatus(failed map[measurev1.Status]int) measurev1.Status {
	var best measurev1.Status
	for st, n := range failed {
		if n > failed[best] || n == failed[best] && st < best {
			best = st
		}
	}
	return best
}

func strs(obs []observation) []string {
	out := make([]string, len(obs))
	for i, o := range obs {
		out[i] = o.String()
	}
	slices.Sort(out)
	return out
}

// Summary is the findings in words, one per line; "no fault found" when
// there is none.
func Summary(fs []Finding) string {
	if len(fs) == 0 {
		return "no fault found"
	}
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}
