package schedule

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// allowlist: lb has an HTTP URL, peer does not (ping only).
var allowlist = []*measurev1.ExternalTarget{
	{Name: "lb", Address: "192.0.2.10", HttpUrl: "http://192.0.2.10/"},
	{Name: "peer", Address: "peer.example.com"},
}

func withExternal(nodes []string) Nodes {
	return Nodes{Mesh: nodes, Targetable: nodes, External: allowlist}
}

func TestAppliesExternal(t *testing.T) {
	for _, path := range []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL} {
		for _, test := range testspec.Tests() {
			want := test == measurev1.Test_TEST_PING || test == measurev1.Test_TEST_HTTP
			if got, wantPath := Applies(test, path), want || testspec.NeedsServer(test); got != wantPath {
				t.Errorf("Applies(%v, %v) = %v, want %v", test, path, got, wantPath)
			}
			wantLB, wantPeer := want, test == measurev1.Test_TEST_PING
			if got := AppliesTo(test, allowlist[0]); got != wantLB {
				t.Errorf("AppliesTo(%v, lb) = %v, want %v", test, got, wantLB)
			}
			if got := AppliesTo(test, allowlist[1]); got != wantPeer {
				t.Errorf("AppliesTo(%v, peer) = %v, want %v", test, got, wantPeer)
			}
		}
	}
}

func TestPlanExternal(t *testing.T) {
	three := []string{"a", "b", "c"}
	ping, http := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}
	hostExt, podExt := measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL
	tests := []struct {
		name      string
		spec      *measurev1.RunSpec
		nodes     []string
		wantNode  int // planned tests on node paths
		wantExt   int // planned tests on external paths
		wantSrcs  []string
		wantPaths []measurev1.Path // external paths planned
	}{
		// 3 nodes x (lb: ping + http, peer: ping) x 2 paths.
		{"external paths only", &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{ping, http},
			Paths: []measurev1.Path{hostExt, podExt}, ExternalTargets: []string{"lb", "peer"}}, three, 0, 3 * 3 * 2, three, []measurev1.Path{hostExt, podExt}},
		// No paths: the default node paths and both external ones.
		{"default paths", &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{ping}, ExternalTargets: []string{"peer"}}, three,
			6 * 3, 3 * 2, three, []measurev1.Path{hostExt, podExt}},
		{"one external path", &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{ping},
			Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, podExt}, ExternalTargets: []string{"lb"}}, three, 6, 3, three, []measurev1.Path{podExt}},
		// The sources are both ends of the pairs.
		{"pairs", &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{ping}, Paths: []measurev1.Path{hostExt},
			Pairs: []*measurev1.NodePair{{SrcNode: "c", DstNode: "a"}}, ExternalTargets: []string{"lb"}}, three, 0, 2, []string{"a", "c"}, []measurev1.Path{hostExt}},
		// One node is enough for external targets.
		{"one node", &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{ping}, ExternalTargets: []string{"lb"}}, []string{"a"},
			0, 2, []string{"a"}, []measurev1.Path{hostExt, podExt}},
		// Default repeats: ping 3, HTTP 5.
		{"default repeats", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{ping, http}, Paths: []measurev1.Path{hostExt},
			ExternalTargets: []string{"lb"}}, []string{"a"}, 0, 3 + 5, []string{"a"}, []measurev1.Path{hostExt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.spec, withExternal(tt.nodes))
			if err != nil {
				t.Fatal(err)
			}
			var node, ext int
			var srcs []string
			var paths []measurev1.Path
			lastExt := -1
			for i, pt := range got {
				if want := fmt.Sprintf("t%05d", i+1); pt.GetTestId() != want {
					t.Errorf("test ID %s, want %s", pt.GetTestId(), want)
				}
				if !testspec.IsExternal(pt.GetPath()) {
					node++
					if slices.Contains([]string{"lb", "peer"}, pt.GetDstNode()) {
						t.Errorf("%s: node path %v to target %s", pt.GetTestId(), pt.GetPath(), pt.GetDstNode())
					}
					if lastExt >= 0 && pt.GetRepeat() == got[lastExt].GetRepeat() {
						t.Errorf("%s: node test after an external one of the same repeat", pt.GetTestId())
					}
					continue
				}
				ext, lastExt = ext+1, i
				srcs, paths = append(srcs, pt.GetSrcNode()), append(paths, pt.GetPath())
				target := allowlist[slices.IndexFunc(allowlist, func(x *measurev1.ExternalTarget) bool { return x.GetName() == pt.GetDstNode() })]
				if !slices.Contains(tt.spec.GetExternalTargets(), target.GetName()) {
					t.Errorf("%s: target %s not asked for", pt.GetTestId(), target.GetName())
				}
				if !Applies(pt.GetSpec().GetTest(), pt.GetPath()) || !AppliesTo(pt.GetSpec().GetTest(), target) {
					t.Errorf("%s: %v planned to %s", pt.GetTestId(), pt.GetSpec().GetTest(), target.GetName())
				}
			}
			slices.Sort(srcs)
			slices.Sort(paths)
			if node != tt.wantNode || ext != tt.wantExt {
				t.Errorf("%d node tests and %d external ones, want %d and %d", node, ext, tt.wantNode, tt.wantExt)
			}
			if srcs = slices.Compact(srcs); !slices.Equal(srcs, tt.wantSrcs) {
				t.Errorf("external sources %v, want %v", srcs, tt.wantSrcs)
			}
			if paths = slices.Compact(paths); !slices.Equal(paths, tt.wantPaths) {
				t.Errorf("external paths %v, want %v", paths, tt.wantPaths)
			}
		})
	}
}

func TestPlanExternalRefuses(t *testing.T) {
	two := []string{"a", "b"}
	ping := []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}
	hostExt := []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL}
	tests := []struct {
		name    string
		spec    *measurev1.RunSpec
		nodes   Nodes
		wantErr error
		wantMsg string
	}{
		{"unknown target", &measurev1.RunSpec{ExternalTargets: []string{"lbb"}}, withExternal(two), ErrInvalid,
			`external_targets[0] "lbb" is not an allowed external target; allowed: lb, peer`},
		{"no allowlist", &measurev1.RunSpec{ExternalTargets: []string{"lb"}}, all(two), ErrInvalid, "allows no external target"},
		{"twice", &measurev1.RunSpec{ExternalTargets: []string{"lb", "peer", "lb"}}, withExternal(two), ErrInvalid, `external_targets[2]: "lb" is listed twice`},
		{"a node's name", &measurev1.RunSpec{ExternalTargets: []string{"peer"}},
			Nodes{Mesh: two, Targetable: []string{"a", "b", "peer"}, External: allowlist}, ErrInvalid, `"peer" is also a node's name`},
		{"no external path", &measurev1.RunSpec{Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}, ExternalTargets: []string{"lb"}},
			withExternal(two), ErrInvalid, "no external path among paths"},
		{"external path without targets", &measurev1.RunSpec{Paths: hostExt}, withExternal(two), ErrInvalid, "host-external needs external_targets"},
		{"HTTP to a ping-only target", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_HTTP}}, Paths: hostExt,
			ExternalTargets: []string{"peer"}}, withExternal(two), ErrInvalid, "no test applies"},
		{"heavy only", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_QPERF_TCP_LAT}}, Paths: hostExt,
			ExternalTargets: []string{"lb"}}, withExternal(two), ErrInvalid,
			`tests[0] qperf_tcp_lat runs nowhere: external target "lb" has no qperf_port and qperf_data_port`},
		{"no node", &measurev1.RunSpec{Tests: ping, Paths: hostExt, ExternalTargets: []string{"lb"}}, withExternal(nil), ErrNoPairs,
			"no node to measure the external targets from"},
		// One node and node paths only: nothing to measure, as before.
		{"one node without targets", &measurev1.RunSpec{Tests: ping}, withExternal(two[:1]), ErrNoPairs, "a mesh needs 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Plan(tt.spec, tt.nodes)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(fmt.Sprint(err), tt.wantMsg) {
				t.Errorf("err = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

// Tests to external targets are light and their targets are no nodes of
// the rounds: the heavy tests still take the fewest rounds.
func TestArrangeExternal(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	spec := &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{
		{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_IPERF3_TCP}, {Test: measurev1.Test_TEST_HTTP},
	}, ExternalTargets: []string{"lb", "peer"}}
	planned, err := Plan(spec, withExternal(nodes))
	if err != nil {
		t.Fatal(err)
	}
	a := Arrange(planned, nil)
	if got, want := len(a.Rounds), OptimalRounds(len(nodes)); got != want {
		t.Errorf("%d rounds, want %d", got, want)
	}
	var ext int
	for _, pt := range a.Light {
		if testspec.IsExternal(pt.GetPath()) {
			ext++
		}
	}
	// 4 nodes x 2 paths x (lb: ping + http, peer: ping).
	if ext != 4*2*3 {
		t.Errorf("%d light external tests, want %d", ext, 4*2*3)
	}
	for _, round := range a.Rounds {
		for _, s := range round {
			if !slices.Contains(nodes, s.Pair.Src) || !slices.Contains(nodes, s.Pair.Dst) {
				t.Errorf("slot %v names a target", s.Pair)
			}
		}
	}
}

// A test to an external target holds its source alone: the target's name
// is no node of the gate.
func TestGateExternal(t *testing.T) {
	g := NewGate(1)
	rel, ok := g.TryAcquire(false, "a", "")
	if !ok {
		t.Fatal("light a->external refused on an idle gate")
	}
	if r, ok := g.TryAcquire(false, "b", ""); !ok {
		t.Error("light b->external refused beside a->external")
	} else {
		r()
	}
	if _, ok := g.TryAcquire(false, "a", "b"); ok {
		t.Error("a second light test on a admitted with maxLight 1")
	}
	rel()
	if r, ok := g.TryAcquire(false, "a", "b"); !ok {
		t.Error("light a-b refused after a's external test ended")
	} else {
		r()
	}
}

// TestPlanLargeFleet: on 3,000 nodes, a run that names no pairs on node
// paths is refused before its 9 million pairs are built (a few MiB
// allocated, not the GiB they take), and an external-only run builds no
// node pair at all: it plans one test per node and target.
func TestPlanLargeFleet(t *testing.T) {
	nodes := make([]string, 3000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%04d", i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Plan(&measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}}}, withExternal(nodes))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the full mesh of 3000 nodes is 8997000 pairs") {
		t.Errorf("a full mesh of 3,000 nodes: %v, want ErrInvalid naming its pairs", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("refusing it allocated %d MiB, want under 64", grew>>20)
	}
	planned, err := Plan(&measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL}, ExternalTargets: []string{"lb"}, Repeats: 1}, withExternal(nodes))
	if err != nil || len(planned) != len(nodes) {
		t.Errorf("an external-only run over 3,000 nodes: %d tests, %v; want %d", len(planned), err, len(nodes))
	}
}
