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
//
// The results of the external paths (host-external, pod-external), whose
// destination is an external target rather than a node, are judged apart
// (external.go): a target that fails from every node that measured it
// (external-down, external-http-down, external-icmp-blocked), a node that
// reaches no target while the others do (egress-broken, or
// pod-egress-broken when only its pods cannot), or failures in no such
// pattern (external-partial, naming the nodes they come from). They never
// change the node localisation.
package diagnose

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/stringers"
	"github.com/meshperf/meshperf/internal/testcell"
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
// SlowRatio of the median of the pairs without the node, or its latency
// above LatencyRatio times theirs and at least MinLatencyIncrease above.
// They are wide on purpose: on a busy machine, or a cloud VM with noisy
// neighbours, healthy veth pairs differ by 4x in throughput and 3x in RTT
// from one test to the next; a broken node is 10x to 100x off.
const (
	// SlowRatio is a ratio, 0..1.
	SlowRatio = 0.2
	// LatencyRatio is a ratio, > 1.
	LatencyRatio = 3.0
	// MinLatencyIncrease is in seconds: 1 ms. A 3x rise from 50 us to
	// 150 us is the noise of a loaded host, not a fault.
	MinLatencyIncrease = 1e-3
)

// MinBadShare is the least share (0..1) of a node's pair-path-tests, on
// the tests and paths that went bad, that must be bad for the node to be
// named when they are degraded rather than failed: a fault on a node
// spoils all of its pairs, noise a few. Failures need half.
const MinBadShare = 0.75

// Finding is one localised fault: about a node (Node set), or about an
// external target (Target set, Node ""); External tells the findings of
// the external paths apart.
type Finding struct {
	// Node is the node the bad pairs have in common; for egress-broken and
	// pod-egress-broken, the node whose tests to the external targets
	// fail; "" for a finding about an external target.
	Node string `json:"node"`
	// Target is the external target (its name in the coordinator's
	// config) a finding of kind external-* is about; "" for a finding
	// about a node.
	Target string `json:"target,omitempty"`
	// Kind is what the evidence points to.
	Kind Kind `json:"kind"`
	// Sources lists, for a finding about a target, the source nodes whose
	// tests to it fail, sorted; nil for a finding about a node.
	Sources []string `json:"sources,omitempty"`
	// Targets lists, for egress-broken and pod-egress-broken, the external
	// targets the node fails to reach while other nodes reach them,
	// sorted; nil otherwise.
	Targets []string `json:"targets,omitempty"`
	// Bad lists the bad pair-path-tests the finding explains, e.g.
	// "node-1->node-2 pod-pod iperf3_tcp: timeout" or, on an external
	// path, "node-3->ingress host-external http: timeout".
	Bad []string `json:"bad"`
	// Of is how many pair-path-tests involving Node were measured on the
	// tests and paths that implicate it; for an external finding, how many
	// source-target-path-tests it was judged on.
	Of int `json:"of"`
}

// String is the finding in one line.
func (f Finding) String() string {
	if s, ok := f.externalString(); ok {
		return s
	}
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
// at least minBad of the bad pair-path-tests involve it on tests and paths
// where they are at least MinBadShare of its pairs (or its failed ones
// alone are half of them), and it
// explains more of them than any other node; its pairs are then set aside
// and the search goes on. Localising needs 3 nodes or more: with 2, both
// explain everything. Busy results (retried, never a sample) and canceled
// ones (CancelRun) are ignored.
// The results of the external paths (host-external, pod-external), whose
// destination is an external target, not a node, take no part in that:
// they are judged apart (see diagnoseExternal) and their findings follow
// the node findings, targets first, then nodes' egress, then partial
// failures.
func Diagnose(results []*measurev1.Result) []Finding {
	node, target := testspec.Split(results)
	findings := localise(observe(node))
	return append(findings, diagnoseExternal(target, findings)...)
}

// localise names the nodes that explain the bad pair-path-tests of obs,
// one after the other.
func localise(obs []observation) []Finding {
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

// bestSuspect returns the node that explains the most bad
// pair-path-tests, with them and how many were measured, or "" if none
// does clearly. Test by test and path by path, a node is implicated when
// its bad pairs there are MinBadShare of its pairs (half if they failed):
// a fault on a node spoils all of its pairs on what it breaks, noise a few
// pairs anywhere, and a peer of the faulty node only its pairs with it.
func bestSuspect(obs []observation) (node string, bad []observation, of int) {
	type tp struct {
		test measurev1.Test
		path measurev1.Path
	}
	type tally struct {
		bad            []observation
		total, failedN int
	}
	cells := map[string]map[tp]*tally{} // node -> test and path -> its pairs
	for _, o := range obs {
		k := tp{o.test, o.path}
		for _, n := range []string{o.src, o.dst} {
			if cells[n] == nil {
				cells[n] = map[tp]*tally{}
			}
			t := cells[n][k]
			if t == nil {
				t = &tally{}
				cells[n][k] = t
			}
			t.total++
			if o.bad() {
				t.bad = append(t.bad, o)
			}
			if o.failed {
				t.failedN++
			}
		}
	}
	type suspect struct {
		node    string
		bad     []observation
		measure int
	}
	var suspects []suspect
	for n, byKind := range cells {
		s := suspect{node: n}
		for _, t := range byKind {
			implicated := len(t.bad) > 0 &&
				(2*t.failedN >= t.total || float64(len(t.bad)) >= MinBadShare*float64(t.total))
			if implicated {
				s.bad = append(s.bad, t.bad...)
				s.measure += t.total
			}
		}
		if len(s.bad) > 0 {
			suspects = append(suspects, s)
		}
	}
	if len(suspects) == 0 {
		return "", nil, 0
	}
	slices.SortFunc(suspects, func(a, b suspect) int {
		return cmp.Or(-cmp.Compare(len(a.bad), len(b.bad)), cmp.Compare(a.node, b.node))
	})
	best := suspects[0]
	if len(best.bad) < minBad {
		return "", nil, 0
	}
	// With a fault on one node, its peers each explain only their own pairs
	// with it, fewer than it does. A tie is ambiguous only when the tied
	// nodes' bad pairs are mostly between them (two nodes, or one broken
	// link); two faulty nodes tie too, and each has bad pairs with others.
	if len(suspects) > 1 && len(suspects[1].bad) == len(best.bad) {
		runnerUp, elsewhere := suspects[1].node, 0
		for _, o := range best.bad {
			if !o.involves(runnerUp) {
				elsewhere++
			}
		}
		if elsewhere < minBad {
			return "", nil, 0
		}
	}
	return best.node, best.bad, best.measure
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
		case o.degraded && testcell.HigherIsBetter(o.test):
			slow++
		case o.degraded:
			latency++
		}
		tests[o.test], paths[o.path] = true, true
	}
	// What still works on the node's pairs tells the kind apart.
	goodTests, goodPaths := map[measurev1.Test]bool{}, map[measurev1.Path]bool{}
	smallPassOnBadPaths := false // ping or TCP latency works where bulk fails
	tcpPassOnBadPaths := false   // something other than ping works there
	for _, o := range all {
		if o.involves(node) && !o.bad() {
			goodTests[o.test], goodPaths[o.path] = true, true
			if paths[o.path] && (o.test == measurev1.Test_TEST_PING || o.test == measurev1.Test_TEST_QPERF_TCP_LAT) {
				smallPassOnBadPaths = true
			}
			if paths[o.path] && o.test != measurev1.Test_TEST_PING {
				tcpPassOnBadPaths = true
			}
		}
	}
	onlyPod := true
	for p := range paths {
		onlyPod = onlyPod && (p == measurev1.Path_PATH_POD_TO_POD || p == measurev1.Path_PATH_POD_TO_SERVICE)
	}
	onlyPing := len(tests) == 1 && tests[measurev1.Test_TEST_PING]
	onlyBulk := true
	for t := range tests {
		onlyBulk = onlyBulk && testcell.HigherIsBetter(t)
	}
	switch {
	case agentGone > failedAll+slow+latency:
		return KindAgentGone
	case failedAll > 0 && onlyPing && tcpPassOnBadPaths:
		return KindICMP
	case failedAll > 0 && onlyBulk && smallPassOnBadPaths:
		return KindMTU
	case failedAll > 0 && onlyPod && goodPaths[measurev1.Path_PATH_HOST_TO_HOST]:
		return KindPodNetwork
	case failedAll > 0:
		return KindUnreachable
	case slow >= latency:
		return KindSlow
	}
	return KindLatency
}

// observe turns results to nodes (Diagnose keeps the external targets'
// apart: a target's name would be a suspect, and a target that is down
// would make every node one) into one observation per pair, path and
// test (results that do not name two different nodes are left out):
// failed when no result of it has a figure; degraded when its median is
// far from the median of the other pairs on the same test, parameters and
// path.
func observe(results []*measurev1.Result) []observation {
	var clean []*measurev1.Result
	for _, r := range results {
		// A result without both nodes, or of a node with itself, names no
		// pair: "" would also stand for "no suspect" in bestSuspect and end
		// the search before the real faults.
		src, dst := r.GetSrcNode(), r.GetDstNode()
		if src == "" || dst == "" || src == dst {
			continue
		}
		if !unmeasured(r.GetStatus()) {
			clean = append(clean, r)
		}
	}
	cells := testcell.Cells(clean)
	obs := observeCells(cells)
	// Degradations: per test, parameters and path, a node whose pairs
	// measure far worse than the pairs it is not in. (Against all other
	// pairs it would not show: in a small cluster most pairs involve any
	// given node.)
	// Per matrix, the medians of all measured pairs, sorted once, and each
	// node's pairs: the reference of a node is the median of all but its
	// own (stats.MedianExcluding), so that 300 nodes cost O(n² log n), not n³.
	for _, m := range testcell.Matrices(cells) {
		var all []float64
		mine := map[string][]*testcell.Cell{}
		for src, row := range m.Cells {
			for dst, c := range row {
				if len(c.Samples) == 0 {
					continue
				}
				all = append(all, c.Stats.Median)
				mine[src] = append(mine[src], c)
				if dst != src {
					mine[dst] = append(mine[dst], c)
				}
			}
		}
		slices.Sort(all)
		for _, n := range m.Nodes {
			cs := mine[n]
			if len(cs) == 0 || len(cs) == len(all) {
				continue
			}
			in := make([]float64, len(cs))
			for i, c := range cs {
				in[i] = c.Stats.Median
			}
			slices.Sort(in)
			ref := stats.MedianExcluding(all, in)
			for _, c := range cs {
				v := c.Stats.Median
				if testcell.HigherIsBetter(c.Test) && v < SlowRatio*ref ||
					!testcell.HigherIsBetter(c.Test) && v > LatencyRatio*ref && v-ref >= MinLatencyIncrease {
					o := obs.ByKey[obsKeyOf(c)]
					o.degraded = true
					o.note = fmt.Sprintf("%s against %s on pairs without %s", report.FormatHeadline(c.Test, v), report.FormatHeadline(c.Test, ref), n)
				}
			}
		}
	}
	out := make([]observation, 0, len(obs.Order))
	for _, o := range obs.Groups() {
		out = append(out, *o)
	}
	return out
}

// obsKey is the key of an observation: a pair, path and test.
type obsKey struct {
	src, dst string
	path     measurev1.Path
	test     measurev1.Test
}

func obsKeyOf(c *testcell.Cell) obsKey { return obsKey{c.Src, c.Dst, c.Path, c.Test} }

// observeCells makes an observation of every pair, path and test of cells
// (over their parameters and families), failed with the worst status of
// a cell that has no samples.
func observeCells(cells []*testcell.Cell) testcell.Grouped[obsKey, *observation] {
	return testcell.Group(cells, obsKeyOf,
		func(c *testcell.Cell) *observation {
			return &observation{src: c.Src, dst: c.Dst, path: c.Path, test: c.Test}
		},
		func(o *observation, c *testcell.Cell) {
			if len(c.Samples) == 0 {
				o.failed, o.status = true, worstStatus(c.Failed)
				o.note = testspec.StatusName(o.status)
			}
		})
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

// strs is obs as text, sorted.
func strs(obs []observation) []string {
	out := stringers.Strings(obs)
	slices.Sort(out)
	return out
}

// Summary is the findings in words, one per line; "no fault found" when
// there is none.
func Summary(fs []Finding) string {
	return stringers.Join(fs, "\n", "no fault found")
}

// unmeasured reports whether a result of status says nothing about the
// network: its server was busy, or its run was canceled before or while
// it ran (CancelRun).
func unmeasured(s measurev1.Status) bool {
	return s == measurev1.Status_STATUS_BUSY || s == measurev1.Status_STATUS_CANCELED
}
