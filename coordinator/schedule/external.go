package schedule

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// AppliesTo reports whether test can run against an external target:
// ping always, HTTP only when the target has an http_url, iperf3 tests
// only when it has an iperf3_port and qperf tests only when it has a
// qperf_port (and so a qperf_data_port): a server behind the target that
// the coordinator's config names. Nothing else.
func AppliesTo(test measurev1.Test, target *measurev1.ExternalTarget) bool {
	return NotApplying(test, target) == ""
}

// NotApplying says why test cannot run against target, naming the
// target and the field it lacks, or returns "" when it can (AppliesTo).
func NotApplying(test measurev1.Test, target *measurev1.ExternalTarget) string {
	switch testspec.Tool(test) {
	case measurev1.Tool_TOOL_PING:
		if test == measurev1.Test_TEST_PING {
			return ""
		}
	case measurev1.Tool_TOOL_CURL:
		if test != measurev1.Test_TEST_HTTP {
			break
		}
		if target.GetHttpUrl() == "" {
			return fmt.Sprintf("external target %q has no http_url", target.GetName())
		}
		return ""
	case measurev1.Tool_TOOL_IPERF3:
		if target.GetIperf3Port() == 0 {
			return fmt.Sprintf("external target %q has no iperf3_port (no iperf3 server behind it in the coordinator's config)", target.GetName())
		}
		return ""
	case measurev1.Tool_TOOL_QPERF:
		if target.GetQperfPort() == 0 || target.GetQperfDataPort() == 0 {
			return fmt.Sprintf("external target %q has no qperf_port and qperf_data_port (no qperf server behind it in the coordinator's config)",
				target.GetName())
		}
		return ""
	}
	return fmt.Sprintf("%s does not run against an external target", testspec.Name(test))
}

// GateKey is the name under which the Gate holds an external target's
// servers for a heavy test (iperf3, qperf): one client at a time per
// server, over every run. Node names cannot contain '/', so it is no
// node's.
func GateKey(target string) string { return "external/" + target }

// checkServerTests refuses a spec whose tests name an iperf3 or qperf
// test (tests[i]) that the plan gives no route at all because none of the
// run's external targets has that server's ports (and the run has no
// node path where it would run): the user asked for it explicitly, so it
// must not vanish silently. Tests of a spec that names none (the
// defaults) are skipped where they do not apply.
func checkServerTests(spec *measurev1.RunSpec, norm []*measurev1.TestSpec, planned []*measurev1.PlannedTest, targets []*measurev1.ExternalTarget) error {
	if len(spec.GetTests()) == 0 || len(targets) == 0 {
		return nil
	}
	for i, t := range norm {
		tool := testspec.Tool(t.GetTest())
		if tool != measurev1.Tool_TOOL_IPERF3 && tool != measurev1.Tool_TOOL_QPERF {
			continue
		}
		if slices.ContainsFunc(planned, func(pt *measurev1.PlannedTest) bool { return pt.GetSpec() == t }) {
			continue
		}
		why := make([]string, 0, len(targets))
		for _, target := range targets {
			why = append(why, NotApplying(t.GetTest(), target))
		}
		return fmt.Errorf("%w: tests[%d] %s runs nowhere: %s; name a target with that server's ports, or drop the test",
			ErrInvalid, i, testspec.Name(t.GetTest()), strings.Join(why, "; "))
	}
	return nil
}

// externalTargets resolves the spec's external_targets against the
// allowlist: each must be in it, once, and must not be a node's name
// (results carry it as dst_node, where it would pass for that node).
func externalTargets(spec *measurev1.RunSpec, nodes Nodes) ([]*measurev1.ExternalTarget, error) {
	asked := spec.GetExternalTargets()
	if len(asked) == 0 {
		return nil, nil
	}
	out := make([]*measurev1.ExternalTarget, 0, len(asked))
	for i, name := range asked {
		j := slices.IndexFunc(nodes.External, func(t *measurev1.ExternalTarget) bool { return t.GetName() == name })
		switch {
		case j < 0 && len(nodes.External) == 0:
			return nil, fmt.Errorf("%w: external_targets[%d] %.70q: the coordinator allows no external target (see its config file's external list)",
				ErrInvalid, i, name)
		case j < 0:
			return nil, fmt.Errorf("%w: external_targets[%d] %.70q is not an allowed external target; allowed: %s",
				ErrInvalid, i, name, strings.Join(names(nodes.External), ", "))
		case slices.Index(asked, name) < i:
			return nil, fmt.Errorf("%w: external_targets[%d]: %q is listed twice", ErrInvalid, i, name)
		case slices.Contains(nodes.Targetable, name) || slices.Contains(nodes.Mesh, name):
			return nil, fmt.Errorf("%w: external_targets[%d] %q is also a node's name; rename the target in the coordinator's config",
				ErrInvalid, i, name)
		}
		out = append(out, nodes.External[j])
	}
	return out, nil
}

// names are the targets' names, in order.
func names(targets []*measurev1.ExternalTarget) []string {
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = t.GetName()
	}
	return out
}

// route is one source and destination of a run, with the paths measured
// between them; target is set for an external target (dst is its name).
type route struct {
	src, dst string
	target   *measurev1.ExternalTarget
	paths    []measurev1.Path
}

// routes lays out what a run measures: the node pairs ps on the node
// paths (none without node paths), then every source node with every
// external target on the external paths. The external sources are the
// nodes of the asked pairs, both ends, sorted, or every mesh node without
// pairs. The error wraps ErrNoPairs when neither gives anything to
// measure.
func routes(ps, asked []*measurev1.NodePair, nodes Nodes, nodePaths, extPaths []measurev1.Path, targets []*measurev1.ExternalTarget) ([]route, error) {
	var out []route
	if len(nodePaths) > 0 {
		for _, p := range ps {
			out = append(out, route{src: p.GetSrcNode(), dst: p.GetDstNode(), paths: nodePaths})
		}
	}
	if len(targets) > 0 {
		sources := nodes.Mesh
		if len(asked) > 0 {
			sources = nil
			for _, p := range asked {
				sources = append(sources, p.GetSrcNode(), p.GetDstNode())
			}
			slices.Sort(sources)
			sources = slices.Compact(sources)
		}
		for _, src := range sources {
			for _, t := range targets {
				out = append(out, route{src: src, dst: t.GetName(), target: t, paths: extPaths})
			}
		}
	}
	if len(out) == 0 {
		if len(targets) > 0 {
			return nil, fmt.Errorf("%w: no node to measure the external targets from", ErrNoPairs)
		}
		return nil, fmt.Errorf("%w: %d node(s) to mesh, a mesh needs 2", ErrNoPairs, len(nodes.Mesh))
	}
	return out, nil
}
