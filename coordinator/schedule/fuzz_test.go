package schedule

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// fuzzSpec builds nodes and a RunSpec from fuzz input: nodeCount nodes
// (at most 12), the last maintenance of them out of the mesh; a pair per
// two bytes of pairBytes (an index past the nodes names an unknown node);
// a test per byte of testBytes (at most 8; values past the enum are
// invalid), its parameters from two bytes of params each (a kind, maybe
// not the test's, and a value); a path per byte of pathBytes (likewise);
// external targets by the bits of extMask (bit 2: a name off the
// allowlist, bit 3: a target with servers); repeats.
func fuzzSpec(nodeCount, maintenance uint8, pairBytes, testBytes, params, pathBytes []byte, extMask, repeats uint8, label string) (*measurev1.RunSpec, Nodes) {
	n := int(nodeCount % 13)
	var nodes Nodes
	for i := range n {
		name := fmt.Sprintf("n%02d", i)
		nodes.Targetable = append(nodes.Targetable, name)
		if i < n-int(maintenance%4) {
			nodes.Mesh = append(nodes.Mesh, name)
		}
	}
	nodes.External = slices.Concat(allowlist, servers[1:2]) // lb, peer, srv (iperf3 and qperf servers)
	spec := &measurev1.RunSpec{Repeats: uint32(repeats % 120), Label: label}
	name := func(b byte) string {
		if i := int(b) % (n + 1); i < n {
			return nodes.Targetable[i]
		}
		return "ghost"
	}
	for i := 0; i+1 < len(pairBytes) && i < 2*16; i += 2 {
		spec.Pairs = append(spec.Pairs, &measurev1.NodePair{SrcNode: name(pairBytes[i]), DstNode: name(pairBytes[i+1])})
	}
	for i, b := range testBytes {
		if i == 8 {
			break
		}
		ts := &measurev1.TestSpec{Test: measurev1.Test(b % 10)}
		if 2*i+1 < len(params) {
			v := uint32(params[2*i+1])
			switch params[2*i] % 5 {
			case 1:
				ts.Params = &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: v * 10}}
			case 2:
				ts.Params = &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{ParallelStreams: v}}
			case 3:
				ts.Params = &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{uint64(v) << 10}}}
			case 4:
				ts.Params = &measurev1.TestSpec_Http{Http: &measurev1.HttpParams{Timeout: durationpb.New(time.Duration(v) * time.Second)}}
			}
		}
		spec.Tests = append(spec.Tests, ts)
	}
	for i, b := range pathBytes {
		if i == 8 {
			break
		}
		spec.Paths = append(spec.Paths, measurev1.Path(b%9))
	}
	for i, target := range []string{"lb", "peer", "nowhere", "srv"} {
		if extMask&(1<<i) != 0 {
			spec.ExternalTargets = append(spec.ExternalTargets, target)
		}
	}
	return spec, nodes
}

// FuzzPlan plans fuzzed specs over fuzzed nodes: Plan never panics, refuses
// with ErrInvalid or ErrNoPairs, and a plan it makes keeps its promises
// (checkPlan). The seeds run with the normal tests.
func FuzzPlan(f *testing.F) {
	f.Add(uint8(3), uint8(0), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), uint8(0), "")
	f.Add(uint8(4), uint8(1), []byte{0, 1, 1, 0, 2, 3}, []byte{1, 3, 6, 8}, []byte(nil), []byte{1, 3, 4}, uint8(0), uint8(2), "seed")
	f.Add(uint8(5), uint8(0), []byte(nil), []byte{2, 3, 5, 7}, []byte(nil), []byte{1, 2, 3, 4, 5}, uint8(0), uint8(1), "")
	f.Add(uint8(2), uint8(0), []byte(nil), []byte{1, 8}, []byte(nil), []byte{1, 6, 7}, uint8(3), uint8(0), "")
	f.Add(uint8(3), uint8(0), []byte{0, 0}, []byte(nil), []byte(nil), []byte(nil), uint8(0), uint8(0), "")                                // a pair to itself
	f.Add(uint8(3), uint8(0), []byte{0, 1, 0, 1}, []byte(nil), []byte(nil), []byte(nil), uint8(0), uint8(0), "")                          // listed twice
	f.Add(uint8(3), uint8(0), []byte{0, 3}, []byte(nil), []byte(nil), []byte(nil), uint8(0), uint8(0), "")                                // an unknown node
	f.Add(uint8(12), uint8(0), []byte(nil), []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte(nil), []byte{1, 2, 3, 4, 5}, uint8(0), uint8(100), "") // too many
	f.Add(uint8(1), uint8(0), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), uint8(0), "")                                 // no pair
	f.Add(uint8(3), uint8(0), []byte(nil), []byte{0, 9}, []byte(nil), []byte{0, 8}, uint8(4), uint8(101), "\x1b[2J")
	f.Add(uint8(3), uint8(0), []byte(nil), []byte{1, 6, 2, 8}, []byte{1, 5, 2, 4, 3, 64, 4, 30}, []byte(nil), uint8(0), uint8(1), "")
	f.Add(uint8(3), uint8(0), []byte(nil), []byte{6}, []byte{1, 5}, []byte(nil), uint8(0), uint8(1), "")             // ping parameters on iperf3
	f.Add(uint8(3), uint8(0), []byte(nil), []byte{1, 2, 3, 6}, []byte(nil), []byte{1, 7, 8}, uint8(8), uint8(2), "") // servers behind srv
	f.Add(uint8(2), uint8(0), []byte(nil), []byte{6}, []byte(nil), []byte{7}, uint8(3), uint8(0), "")                // iperf3 to lb and peer: refused
	f.Fuzz(func(t *testing.T, nodeCount, maintenance uint8, pairBytes, testBytes, params, pathBytes []byte, extMask, repeats uint8, label string) {
		spec, nodes := fuzzSpec(nodeCount, maintenance, pairBytes, testBytes, params, pathBytes, extMask, repeats, label)
		planned, err := Plan(spec, nodes)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNoPairs) {
				t.Fatalf("Plan: %v; want ErrInvalid or ErrNoPairs", err)
			}
			if planned != nil {
				t.Fatalf("Plan failed (%v) with %d tests", err, len(planned))
			}
			return
		}
		checkPlan(t, spec, nodes, planned)
	})
}

// checkPlan checks a plan against its spec: bounded size, IDs in sequence,
// every test on a path it applies to and between known ends, every pair
// planned alike, and no node in two slots of one round of Arrange.
func checkPlan(t *testing.T, spec *measurev1.RunSpec, nodes Nodes, planned []*measurev1.PlannedTest) {
	t.Helper()
	if len(planned) == 0 || len(planned) > MaxPlannedTests {
		t.Fatalf("%d planned tests; want 1..%d", len(planned), MaxPlannedTests)
	}
	tests := max(len(spec.GetTests()), len(DefaultTests()))
	paths := max(len(spec.GetPaths()), len(testspec.DefaultPaths())+2)
	routes := max(len(spec.GetPairs()), len(nodes.Mesh)*len(nodes.Mesh)) + len(nodes.Targetable)*len(spec.GetExternalTargets())
	if bound := max(int(spec.GetRepeats()), 5) * routes * paths * tests; len(planned) > bound {
		t.Fatalf("%d planned tests, more than repeats x routes x paths x tests = %d", len(planned), bound)
	}
	// The node pairs the spec asks for, or the default mesh's.
	want := map[Pair]bool{}
	if len(spec.GetPairs()) > 0 {
		for _, p := range spec.GetPairs() {
			want[Pair{p.GetSrcNode(), p.GetDstNode()}] = true
		}
	} else {
		for _, s := range nodes.Mesh {
			for _, d := range nodes.Mesh {
				if s != d {
					want[Pair{s, d}] = true
				}
			}
		}
	}
	perPair := map[Pair]int{}
	for i, pt := range planned {
		if id := fmt.Sprintf("t%05d", i+1); pt.GetTestId() != id {
			t.Fatalf("test %d has ID %q, want %q", i, pt.GetTestId(), id)
		}
		test, path := pt.GetSpec().GetTest(), pt.GetPath()
		if !Applies(test, path) {
			t.Fatalf("%s: %v planned on %v, where it does not apply", pt.GetTestId(), test, path)
		}
		if !slices.Contains(nodes.Targetable, pt.GetSrcNode()) {
			t.Fatalf("%s: source %q is no targetable node", pt.GetTestId(), pt.GetSrcNode())
		}
		if testspec.IsExternal(path) {
			if !slices.Contains(spec.GetExternalTargets(), pt.GetDstNode()) {
				t.Fatalf("%s: external destination %q was not asked for", pt.GetTestId(), pt.GetDstNode())
			}
			target := nodes.External[slices.IndexFunc(nodes.External, func(e *measurev1.ExternalTarget) bool { return e.GetName() == pt.GetDstNode() })]
			if why := NotApplying(test, target); why != "" {
				t.Fatalf("%s: %v planned to %s: %s", pt.GetTestId(), test, target.GetName(), why)
			}
			continue
		}
		p := Pair{pt.GetSrcNode(), pt.GetDstNode()}
		if !want[p] {
			t.Fatalf("%s: pair %s->%s was not asked for (nor in the default mesh)", pt.GetTestId(), p.Src, p.Dst)
		}
		perPair[p]++
	}
	// Every pair appears as planned: all of them, with as many tests each,
	// or none (no test applies to the node paths).
	if len(perPair) > 0 {
		var first int
		for _, c := range perPair {
			first = c
			break
		}
		for p := range want {
			if perPair[p] != first {
				t.Fatalf("pair %s->%s has %d tests, another %d: every pair is planned alike", p.Src, p.Dst, perPair[p], first)
			}
		}
	}
	a := Arrange(planned, nil)
	seen := len(a.Light)
	for r, round := range a.Rounds {
		busy := map[string]bool{}
		for _, slot := range round {
			for _, n := range []string{slot.Pair.Src, slot.Pair.Dst} {
				if busy[n] {
					t.Fatalf("round %d: node %s in two slots", r, n)
				}
				busy[n] = true
			}
			for _, pt := range slot.Tests {
				if !testspec.IsHeavy(pt.GetSpec().GetTest()) || (Pair{pt.GetSrcNode(), pt.GetDstNode()}) != slot.Pair {
					t.Fatalf("round %d: slot %s->%s holds %s (%v %s->%s)", r, slot.Pair.Src, slot.Pair.Dst, pt.GetTestId(),
						pt.GetSpec().GetTest(), pt.GetSrcNode(), pt.GetDstNode())
				}
			}
			seen += len(slot.Tests)
		}
	}
	for _, q := range a.External {
		for _, pt := range q.Tests {
			if pt.GetDstNode() != q.Target || !testspec.IsHeavy(pt.GetSpec().GetTest()) || !testspec.IsExternal(pt.GetPath()) {
				t.Fatalf("queue %s holds %s (%v %v to %s)", q.Target, pt.GetTestId(), pt.GetSpec().GetTest(), pt.GetPath(), pt.GetDstNode())
			}
		}
		seen += len(q.Tests)
	}
	if seen != len(planned) {
		t.Fatalf("Arrange laid out %d tests of %d", seen, len(planned))
	}
}
