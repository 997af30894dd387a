package diagnose

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	hostExt = measurev1.Path_PATH_HOST_TO_EXTERNAL
	podExt  = measurev1.Path_PATH_POD_TO_EXTERNAL
	ping    = measurev1.Test_TEST_PING
	httpT   = measurev1.Test_TEST_HTTP
)

// extFault says the status of every result of one source, target, path
// and test; nil means all OK.
type extFault func(src, target string, p measurev1.Path, t measurev1.Test) measurev1.Status

// nodes returns node-1 .. node-n.
func nodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%d", i+1)
	}
	return out
}

// targetsPH are two targets: ingress has an http_url (ping and HTTP),
// other-cluster has none (ping only).
var targetsPH = map[string][]measurev1.Test{"ingress": {ping, httpT}, "other-cluster": {ping}}

// ingressOnly is one target with ping and HTTP.
var ingressOnly = map[string][]measurev1.Test{"ingress": {ping, httpT}}

// ext builds the external results of srcs to targets on both external
// paths, two samples per cell, shaped by f.
func ext(srcs []string, targets map[string][]measurev1.Test, f extFault) []*measurev1.Result {
	var rs []*measurev1.Result
	for _, src := range srcs {
		for target, tests := range targets {
			for _, p := range []measurev1.Path{hostExt, podExt} {
				for _, te := range tests {
					for k := range 2 {
						st := measurev1.Status_STATUS_OK
						if f != nil {
							st = f(src, target, p, te)
						}
						r := &measurev1.Result{SrcNode: src, DstNode: target, Path: p, Spec: &measurev1.TestSpec{Test: te}, Status: st}
						if st == measurev1.Status_STATUS_OK {
							if te == httpT {
								r.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, TotalSeconds: 5e-3 * (1 + 0.01*float64(k))}}
							} else {
								r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 1e-3 * (1 + 0.01*float64(k))}}
							}
						}
						rs = append(rs, r)
					}
				}
			}
		}
	}
	return rs
}

// externalResults are every node's ping results to target on both
// external paths, all with status st.
func externalResults(n int, target string, st func(src string) measurev1.Status) []*measurev1.Result {
	return ext(nodes(n), map[string][]measurev1.Test{target: {ping}}, func(src, _ string, _ measurev1.Path, _ measurev1.Test) measurev1.Status {
		return st(src)
	})
}

// describe is a finding in short: "node-2 pod-network", "node-3
// egress-broken to ingress", "ingress external-down from node-1,node-2".
func describe(f Finding) string {
	switch {
	case f.Target != "":
		return fmt.Sprintf("%s %s from %s", f.Target, f.Kind, strings.Join(f.Sources, ","))
	case len(f.Targets) > 0:
		return fmt.Sprintf("%s %s to %s", f.Node, f.Kind, strings.Join(f.Targets, ","))
	}
	return fmt.Sprintf("%s %s", f.Node, f.Kind)
}

func describeAll(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, describe(f))
	}
	return strings.Join(out, "; ")
}

const (
	ok      = measurev1.Status_STATUS_OK
	timeout = measurev1.Status_STATUS_TIMEOUT
)

// failWhen returns an extFault failing (timeout) where cond holds.
func failWhen(cond func(src, target string, p measurev1.Path, t measurev1.Test) bool) extFault {
	return func(src, target string, p measurev1.Path, t measurev1.Test) measurev1.Status {
		if cond(src, target, p, t) {
			return timeout
		}
		return ok
	}
}

func TestDiagnoseExternal(t *testing.T) {
	all4 := "node-1,node-2,node-3,node-4"
	podDrop2 := func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
		if on("node-2")(s, d) && p == measurev1.Path_PATH_POD_TO_POD {
			return timeout, 0
		}
		return ok, 1
	}
	unreachable2 := func(s, d string, _ measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
		if on("node-2")(s, d) {
			return timeout, 0
		}
		return ok, 1
	}
	agentGone1 := func(s, d string, _ measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
		if on("node-1")(s, d) {
			return measurev1.Status_STATUS_AGENT_UNAVAILABLE, 0
		}
		return ok, 1
	}
	cases := []struct {
		name    string
		mesh    fault // on 4 nodes
		srcs    []string
		targets map[string][]measurev1.Test
		f       extFault
		want    string
	}{
		{"all reach every target", nil, nodes(4), targetsPH, nil, ""},
		{"target down from all nodes", nil, nodes(4), targetsPH,
			failWhen(func(_, tg string, _ measurev1.Path, _ measurev1.Test) bool { return tg == "ingress" }),
			"ingress external-down from " + all4},
		{"ping-only target down from all nodes", nil, nodes(4), targetsPH,
			failWhen(func(_, tg string, _ measurev1.Path, _ measurev1.Test) bool { return tg == "other-cluster" }),
			"other-cluster external-down from " + all4},
		{"two sources are enough for a target down", nil, nodes(2), ingressOnly,
			failWhen(func(string, string, measurev1.Path, measurev1.Test) bool { return true }),
			"ingress external-down from node-1,node-2"},
		{"HTTP down from all nodes, ping works", nil, nodes(4), targetsPH,
			failWhen(func(_, tg string, _ measurev1.Path, te measurev1.Test) bool { return tg == "ingress" && te == httpT }),
			"ingress external-http-down from " + all4},
		{"ping blocked from all nodes, HTTP works", nil, nodes(4), targetsPH,
			failWhen(func(_, tg string, _ measurev1.Path, te measurev1.Test) bool { return tg == "ingress" && te == ping }),
			"ingress external-icmp-blocked from " + all4},
		{"one node's egress broken (host and pod), two targets", nil, nodes(4), targetsPH,
			failWhen(func(s, _ string, _ measurev1.Path, _ measurev1.Test) bool { return s == "node-3" }),
			"node-3 egress-broken to ingress,other-cluster"},
		{"one node's egress broken, one target", nil, nodes(3), ingressOnly,
			failWhen(func(s, _ string, _ measurev1.Path, _ measurev1.Test) bool { return s == "node-2" }),
			"node-2 egress-broken to ingress"},
		{"only pod-external fails on one node", nil, nodes(4), targetsPH,
			failWhen(func(s, _ string, p measurev1.Path, _ measurev1.Test) bool { return s == "node-3" && p == podExt }),
			"node-3 pod-egress-broken to ingress,other-cluster"},
		{"pod-external fails from every node: no node to blame", nil, nodes(3), ingressOnly,
			failWhen(func(_, _ string, p measurev1.Path, _ measurev1.Test) bool { return p == podExt }),
			"ingress external-partial from node-1,node-2,node-3"},
		{"pod-external fails on one node, host-external partly: no pod egress to blame", nil, nodes(4), ingressOnly,
			failWhen(func(s, _ string, p measurev1.Path, te measurev1.Test) bool {
				return s == "node-3" && (p == podExt || te == ping)
			}),
			"ingress external-partial from node-3"},
		{"only a node's external tests were not taken (agent_unavailable): no evidence", nil, nodes(4), targetsPH,
			func(s, _ string, _ measurev1.Path, _ measurev1.Test) measurev1.Status {
				if s == "node-1" {
					return measurev1.Status_STATUS_AGENT_UNAVAILABLE
				}
				return ok
			}, ""},
		{"two nodes of four fail every target", nil, nodes(4), targetsPH,
			failWhen(func(s, _ string, _ measurev1.Path, _ measurev1.Test) bool { return s == "node-2" || s == "node-3" }),
			"node-2 egress-broken to ingress,other-cluster; node-3 egress-broken to ingress,other-cluster"},
		{"two nodes of four fail one target of two", nil, nodes(4), targetsPH,
			failWhen(func(s, tg string, _ measurev1.Path, _ measurev1.Test) bool {
				return (s == "node-2" || s == "node-3") && tg == "ingress"
			}),
			"ingress external-partial from node-2,node-3"},
		{"one node fails one target of two", nil, nodes(4), targetsPH,
			failWhen(func(s, tg string, _ measurev1.Path, _ measurev1.Test) bool { return s == "node-4" && tg == "ingress" }),
			"ingress external-partial from node-4"},
		{"HTTP down everywhere and one node's egress broken", nil, nodes(4), ingressOnly,
			failWhen(func(s, _ string, _ measurev1.Path, te measurev1.Test) bool { return te == httpT || s == "node-1" }),
			"ingress external-http-down from " + all4 + "; node-1 egress-broken to ingress"},
		{"a single source measuring the target: not enough evidence", nil, []string{"node-1"}, targetsPH,
			failWhen(func(string, string, measurev1.Path, measurev1.Test) bool { return true }), ""},
		{"one flaky test is no fault", nil, nodes(4), targetsPH,
			failWhen(func(s, tg string, p measurev1.Path, te measurev1.Test) bool {
				return s == "node-2" && tg == "ingress" && p == hostExt && te == ping
			}), ""},
		{"agent gone: its external results are no evidence", agentGone1, nodes(4), targetsPH,
			func(s, _ string, _ measurev1.Path, _ measurev1.Test) measurev1.Status {
				if s == "node-1" {
					return measurev1.Status_STATUS_AGENT_UNAVAILABLE
				}
				return ok
			}, "node-1 agent-gone"},
		{"an unreachable node is not also egress-broken", unreachable2, nodes(4), targetsPH,
			failWhen(func(s, _ string, _ measurev1.Path, _ measurev1.Test) bool { return s == "node-2" }),
			"node-2 unreachable"},
		{"pod network broken and its pod egress too: both said", podDrop2, nodes(4), targetsPH,
			failWhen(func(s, _ string, p measurev1.Path, _ measurev1.Test) bool { return s == "node-2" && p == podExt }),
			"node-2 pod-network; node-2 pod-egress-broken to ingress,other-cluster"},
		{"node fault and a target down: both said, node first", podDrop2, nodes(4), targetsPH,
			failWhen(func(_, tg string, _ measurev1.Path, _ measurev1.Test) bool { return tg == "other-cluster" }),
			"node-2 pod-network; other-cluster external-down from " + all4},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			fs := Diagnose(append(mesh(4, tt.mesh), ext(tt.srcs, tt.targets, tt.f)...))
			if got := describeAll(fs); got != tt.want {
				t.Errorf("findings %q, want %q\n%s", got, tt.want, Summary(fs))
			}
			for _, f := range fs {
				if f.External() != (f.Target != "" || f.Kind == KindEgress || f.Kind == KindPodEgress) {
					t.Errorf("%s: External() = %v", describe(f), f.External())
				}
				if len(f.Bad) == 0 || f.Of < len(f.Bad) {
					t.Errorf("%s: %d bad of %d", describe(f), len(f.Bad), f.Of)
				}
				for _, e := range f.Bad {
					if isExt := strings.Contains(e, "-external "); isExt != f.External() {
						t.Errorf("%s cites %q", describe(f), e)
					}
				}
			}
		})
	}
}

// The node localisation is the same with or without external results,
// whatever they say.
func TestDiagnoseExternalLeavesNodesAlone(t *testing.T) {
	down := func(string) measurev1.Status { return measurev1.Status_STATUS_UNREACHABLE }
	node3Out := func(src string) measurev1.Status {
		if src == "node-3" {
			return timeout
		}
		return ok
	}
	up := func(string) measurev1.Status { return ok }
	podsOf2 := func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
		if on("node-2")(s, d) && p == measurev1.Path_PATH_POD_TO_POD {
			return timeout, 0
		}
		return ok, 1
	}
	icmp3 := func(s, d string, _ measurev1.Path, te measurev1.Test) (measurev1.Status, float64) {
		if on("node-3")(s, d) && te == ping {
			return measurev1.Status_STATUS_UNREACHABLE, 0
		}
		return ok, 1
	}
	meshes := []struct {
		name string
		f    fault
		want string // the node findings of the mesh alone
	}{
		{"clean", nil, ""},
		{"pod network on node-2", podsOf2, "node-2 pod-network"},
		{"ICMP on node-3", icmp3, "node-3 icmp-blocked"},
	}
	externals := []struct {
		name string
		st   func(string) measurev1.Status
	}{{"target down", down}, {"node-3 cannot leave", node3Out}, {"targets up", up}}
	for _, m := range meshes {
		base := mesh(4, m.f)
		if got := describeAll(Diagnose(base)); got != m.want {
			t.Fatalf("%s alone: findings %q, want %q", m.name, got, m.want)
		}
		for _, e := range externals {
			t.Run(m.name+", "+e.name, func(t *testing.T) {
				fs := Diagnose(append(slices.Clone(base), externalResults(4, "ingress", e.st)...))
				var nodeFs []Finding
				for _, f := range fs {
					if !f.External() {
						nodeFs = append(nodeFs, f)
					}
				}
				if got := describeAll(nodeFs); got != m.want {
					t.Errorf("node findings %q, want %q as without external results\n%s", got, m.want, Summary(fs))
				}
			})
		}
	}
}

// The one-line and JSON forms: unchanged for node findings, new lines for
// the external kinds.
func TestFindingForms(t *testing.T) {
	cases := []struct {
		f        Finding
		line     string
		jsonKeys []string
	}{
		{Finding{Node: "node-2", Kind: KindPodNetwork, Bad: []string{"node-1->node-2 pod-pod ping: timeout"}, Of: 12},
			"node node-2: pod-network (1 of its 12 pair tests bad; e.g. node-1->node-2 pod-pod ping: timeout)",
			[]string{"bad", "kind", "node", "of"}},
		{Finding{Target: "ingress", Kind: KindExternalDown, Sources: []string{"node-1", "node-2"}, Bad: []string{"node-1->ingress host-external http: timeout", "x", "y", "z"}, Of: 4},
			"target ingress: external-down (every test fails from all 2 nodes that measured it: 4 of 4 tests bad; e.g. node-1->ingress host-external http: timeout)",
			[]string{"bad", "kind", "node", "of", "sources", "target"}},
		{Finding{Target: "ingress", Kind: KindExternalHTTPDown, Sources: []string{"node-1", "node-2"}, Bad: []string{"a", "b"}, Of: 2},
			"target ingress: external-http-down (HTTP fails from all 2 nodes that measured it, ping works: 2 of 2 HTTP tests bad; e.g. a)",
			[]string{"bad", "kind", "node", "of", "sources", "target"}},
		{Finding{Target: "ingress", Kind: KindExternalICMP, Sources: []string{"node-1", "node-2", "node-3"}, Bad: []string{"a", "b", "c"}, Of: 3},
			"target ingress: external-icmp-blocked (ping fails from all 3 nodes that measured it, HTTP works: 3 of 3 ping tests bad; e.g. a)",
			[]string{"bad", "kind", "node", "of", "sources", "target"}},
		{Finding{Target: "ingress", Kind: KindExternalPartial, Sources: []string{"node-2", "node-3"}, Bad: []string{"a", "b"}, Of: 16},
			"target ingress: external-partial (fails from node-2, node-3: 2 of 16 tests bad; e.g. a)",
			[]string{"bad", "kind", "node", "of", "sources", "target"}},
		{Finding{Node: "node-3", Kind: KindEgress, Targets: []string{"ingress", "other-cluster"}, Bad: []string{"a", "b"}, Of: 2},
			"node node-3: egress-broken (2 of its 2 tests to external targets bad; other nodes reach ingress, other-cluster; e.g. a)",
			[]string{"bad", "kind", "node", "of", "targets"}},
		{Finding{Node: "node-3", Kind: KindPodEgress, Targets: []string{"ingress"}, Bad: []string{"a"}, Of: 1},
			"node node-3: pod-egress-broken (1 of its 1 pod-external tests bad, host-external works; other nodes' pods reach ingress; e.g. a)",
			[]string{"bad", "kind", "node", "of", "targets"}},
	}
	for _, tt := range cases {
		t.Run(string(tt.f.Kind), func(t *testing.T) {
			if got := tt.f.String(); got != tt.line {
				t.Errorf("String\n got %q\nwant %q", got, tt.line)
			}
			b, err := json.Marshal(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tt.jsonKeys) {
				t.Errorf("JSON keys %v, want %v: %s", keys, tt.jsonKeys, b)
			}
		})
	}
}
