// Package schedule owns what a run measures and when each test may start:
// Plan expands a RunSpec into planned tests (defaults, node pairs, paths,
// repeats), and Gate keeps tests that would disturb each other apart.
package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Limits of a run.
const (
	// MaxRepeats bounds RunSpec.repeats.
	MaxRepeats = 100
	// MaxPlannedTests bounds the size of one run.
	MaxPlannedTests = 100_000
)

// ErrInvalid wraps every refusal of a RunSpec; the message names the field
// and value.
var ErrInvalid = errors.New("invalid run spec")

// ErrNoPairs means there is nothing to measure: fewer than two known
// nodes, or no node at all for a run of external targets only.
var ErrNoPairs = errors.New("no node pair to measure")

// DefaultTests are the tests of a RunSpec that names none
// (testspec.DefaultTests), with default parameters.
func DefaultTests() []*measurev1.TestSpec {
	var out []*measurev1.TestSpec
	for _, t := range testspec.DefaultTests() {
		out = append(out, &measurev1.TestSpec{Test: t})
	}
	return out
}

// DefaultRepeats is the number of samples of a test when the RunSpec asks
// for none: a few for the cheap probes, so that their cells have a spread
// and a confidence interval; one for the tests that load the link for
// seconds (ask for more with repeats).
func DefaultRepeats(t measurev1.Test) uint32 {
	switch t {
	case measurev1.Test_TEST_PING:
		return 3
	case measurev1.Test_TEST_HTTP:
		return 5
	}
	return 1
}

// Applies reports whether test makes sense on path. Ping does not on the
// service paths: kube-proxy in iptables mode DNATs TCP and UDP only, so an
// ICMP echo to a ClusterIP goes unanswered on a healthy cluster. On the
// external paths run ping, HTTP, iperf3 and qperf, each only to a target
// that has what it needs (an http_url, a server's ports: see AppliesTo).
// testspec.Applies has the rule, beside the kinds of destination.
func Applies(test measurev1.Test, path measurev1.Path) bool { return testspec.Applies(test, path) }

// Nodes are the node names Plan works with, sorted.
type Nodes struct {
	// Mesh are the nodes of a default mesh (a spec without pairs).
	Mesh []string
	// Targetable are the nodes a spec may name in its pairs; a superset of
	// Mesh (it adds nodes in maintenance).
	Targetable []string
	// External is the allowlist of external targets a spec may name in
	// its external_targets (the coordinator's config file); nil means none.
	External []*measurev1.ExternalTarget
	// Families returns the IP families a node has addresses of, IPv4
	// first; nil (or nil for a node, unknown) means IPv4 only. Nil
	// Families plans as before families existed: planned tests without
	// ip_family.
	Families func(node string) []measurev1.IPFamily
}

// pairFamilies returns the families to plan a node pair in: asked (the
// RunSpec's ip_families) if any, else every family both nodes have (IPv4
// when they share none, so the failure shows). With nil nodes.Families,
// asked (nil if none).
func (nodes Nodes) pairFamilies(asked []measurev1.IPFamily, src, dst string) []measurev1.IPFamily {
	if nodes.Families == nil || len(asked) > 0 {
		return asked
	}
	of := func(n string) []measurev1.IPFamily {
		if fs := nodes.Families(n); len(fs) > 0 {
			return fs
		}
		return []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV4}
	}
	var out []measurev1.IPFamily
	dstFams := of(dst)
	for _, f := range of(src) {
		if slices.Contains(dstFams, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		out = []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV4}
	}
	return out
}

// Plan expands spec into planned tests over nodes (connected or not: the
// caller decides what a missing agent means).
// Tests are normalized (defaults filled, parameters validated); the order is
// repeat, pair, family, path, test, which spreads a pair's tests over the
// run (families: see Nodes.Families and RunSpec.ip_families; the external
// paths are planned once, without a family): the
// node pairs on the node paths first, then each source node with each
// external target (dst_node is the target's name) on the external paths.
// The external sources are the nodes of the requested pairs (both ends),
// or every mesh node without pairs. A test runs to an external target
// only if it applies to it (AppliesTo: iperf3 and qperf only to a target
// with that server's ports); a test the spec names that so runs nowhere
// at all is refused (ErrInvalid, naming it and what each target lacks),
// one of the default tests is skipped. Test IDs are "t" and a 5-digit
// sequence number. Errors wrap ErrInvalid or ErrNoPairs (nothing to
// measure: no node pair for the node paths and no node for the external
// ones).
func Plan(spec *measurev1.RunSpec, nodes Nodes) ([]*measurev1.PlannedTest, error) {
	p, err := PlanRun(spec, nodes)
	return p.Tests, err
}

// PlanRun is Plan with the window of the full mesh that the tests
// measure: a spec without pairs plans the rounds of the mesh it asks for
// (RunSpec.mesh_rounds, all of them by default; see meshPairs), in fewer
// rounds (at least one) where those would be more than MaxPlannedTests
// tests. mesh_rounds with pairs is refused (ErrInvalid).
func PlanRun(spec *measurev1.RunSpec, nodes Nodes) (Planned, error) {
	tests := spec.GetTests()
	if len(tests) == 0 {
		tests = DefaultTests()
	}
	norm := make([]*measurev1.TestSpec, len(tests))
	for i, t := range tests {
		n, err := testspec.Normalize(t)
		if err != nil {
			return Planned{}, fmt.Errorf("%w: tests[%d]: %w", ErrInvalid, i, err)
		}
		norm[i] = n
	}
	if l := spec.GetLabel(); len(l) > 64 || strings.IndexFunc(l, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return Planned{}, fmt.Errorf("%w: label %.70q: want at most 64 printable characters", ErrInvalid, l)
	}
	paths, err := planPaths(spec)
	if err != nil {
		return Planned{}, err
	}
	targets, err := externalTargets(spec, nodes)
	if err != nil {
		return Planned{}, err
	}
	if r := spec.GetRepeats(); r > MaxRepeats {
		return Planned{}, fmt.Errorf("%w: repeats %d is above %d", ErrInvalid, r, MaxRepeats)
	}
	repeatsOf := func(t measurev1.Test) uint32 {
		if r := spec.GetRepeats(); r > 0 {
			return r
		}
		return DefaultRepeats(t)
	}
	var repeats uint32
	for _, t := range norm {
		repeats = max(repeats, repeatsOf(t.GetTest()))
	}
	nodePaths, extPaths := testspec.SplitPaths(paths)
	if len(targets) > 0 && len(extPaths) == 0 {
		return Planned{}, fmt.Errorf("%w: external_targets %s: no external path among paths (add host-external or pod-external)",
			ErrInvalid, strings.Join(names(targets), ","))
	}
	if len(targets) == 0 && len(extPaths) > 0 {
		return Planned{}, fmt.Errorf("%w: paths: %s needs external_targets", ErrInvalid, testspec.PathName(extPaths[0]))
	}
	// A pair's tests (how many, in one family), and the external ones:
	// what a run of mesh rounds may hold.
	perFamily := 0
	extTests := 0
	for r := range repeats {
		for _, t := range norm {
			if r >= repeatsOf(t.GetTest()) {
				continue
			}
			for _, path := range nodePaths {
				if Applies(t.GetTest(), path) {
					perFamily++
				}
			}
			for _, path := range extPaths {
				for _, tg := range targets {
					if Applies(t.GetTest(), path) && AppliesTo(t.GetTest(), tg) {
						extTests++
					}
				}
			}
		}
	}
	var ps []*measurev1.NodePair
	var win MeshWindow
	switch asked := spec.GetPairs(); {
	case len(asked) > 0 && spec.GetMeshRounds() > 0:
		return Planned{}, fmt.Errorf("%w: mesh_rounds %d: rounds of the full mesh are for a run without pairs", ErrInvalid, spec.GetMeshRounds())
	case len(asked) > 0:
		if ps, err = checkPairs(asked, nodes); err != nil {
			return Planned{}, err
		}
	case len(nodePaths) > 0:
		cost := func(src, dst string) int {
			return max(1, len(nodes.pairFamilies(spec.GetIpFamilies(), src, dst))) * perFamily
		}
		budget := MaxPlannedTests - extTests*max(1, len(nodes.Mesh))
		if ps, win, err = meshPairs(spec, nodes.Mesh, cost, budget); err != nil {
			return Planned{}, err
		}
	}
	routes, err := routes(ps, spec.GetPairs(), nodes, nodePaths, extPaths, targets)
	if err != nil {
		return Planned{}, err
	}
	if err := protocol.ValidateFamilies("ip_families", spec.GetIpFamilies()); err != nil {
		return Planned{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}

	var planned []*measurev1.PlannedTest
	for r := uint32(0); r < repeats; r++ {
		for _, rt := range routes {
			families := []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_UNSPECIFIED}
			if rt.target == nil {
				if fs := nodes.pairFamilies(spec.GetIpFamilies(), rt.src, rt.dst); fs != nil {
					families = fs
				}
			}
			for _, fam := range families {
				for _, path := range rt.paths {
					for _, t := range norm {
						if !Applies(t.GetTest(), path) || rt.target != nil && !AppliesTo(t.GetTest(), rt.target) || r >= repeatsOf(t.GetTest()) {
							continue
						}
						if len(planned) == MaxPlannedTests {
							return Planned{}, fmt.Errorf("%w: more than %d tests; ask for fewer pairs, paths, targets, families, tests or repeats", ErrInvalid, MaxPlannedTests)
						}
						planned = append(planned, &measurev1.PlannedTest{
							TestId:  fmt.Sprintf("t%05d", len(planned)+1),
							SrcNode: rt.src, DstNode: rt.dst,
							Path: path, Spec: t, Repeat: r, IpFamily: fam,
						})
					}
				}
			}
		}
	}
	if err := checkServerTests(spec, norm, planned, targets); err != nil {
		return Planned{}, err
	}
	if len(planned) == 0 {
		return Planned{}, fmt.Errorf("%w: no test applies to the paths (and external targets) asked for", ErrInvalid)
	}
	return Planned{Tests: planned, Mesh: win}, nil
}

// planPaths returns the spec's paths, checked, or the default ones (with
// both external paths when the spec names external targets).
func planPaths(spec *measurev1.RunSpec) ([]measurev1.Path, error) {
	paths := spec.GetPaths()
	if len(paths) == 0 {
		paths = testspec.DefaultPaths()
		if len(spec.GetExternalTargets()) > 0 {
			paths = append(paths, measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL)
		}
	}
	for i, p := range paths {
		if _, ok := measurev1.Path_name[int32(p)]; !ok || p == measurev1.Path_PATH_UNSPECIFIED {
			return nil, fmt.Errorf("%w: paths[%d]: %v is not a path", ErrInvalid, i, p)
		}
	}
	return paths, nil
}

// checkPairs returns the requested pairs, checked against the
// targetable nodes: known, distinct ends, each pair once, at most
// MaxPlannedTests of them.
func checkPairs(asked []*measurev1.NodePair, nodes Nodes) ([]*measurev1.NodePair, error) {
	if len(asked) > MaxPlannedTests {
		return nil, fmt.Errorf("%w: %d pairs, more than %d tests", ErrInvalid, len(asked), MaxPlannedTests)
	}
	targetable := make(map[string]bool, len(nodes.Targetable))
	for _, n := range nodes.Targetable {
		targetable[n] = true
	}
	seen := make(map[[2]string]bool, len(asked))
	for i, p := range asked {
		src, dst := p.GetSrcNode(), p.GetDstNode()
		switch {
		case src == dst:
			return nil, fmt.Errorf("%w: pairs[%d]: source and destination are both %q", ErrInvalid, i, src)
		case !targetable[src]:
			return nil, fmt.Errorf("%w: pairs[%d].src_node %q is not a known node (or it departed)", ErrInvalid, i, src)
		case !targetable[dst]:
			return nil, fmt.Errorf("%w: pairs[%d].dst_node %q is not a known node (or it departed)", ErrInvalid, i, dst)
		case seen[[2]string{src, dst}]:
			return nil, fmt.Errorf("%w: pairs[%d]: %s->%s is listed twice", ErrInvalid, i, src, dst)
		}
		seen[[2]string{src, dst}] = true
	}
	return asked, nil
}
