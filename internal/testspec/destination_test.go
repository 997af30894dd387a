package testspec

import (
	"slices"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestKindOf(t *testing.T) {
	tests := []struct {
		path     measurev1.Path
		kind     Kind
		name     string
		baseline measurev1.Path
	}{
		{measurev1.Path_PATH_UNSPECIFIED, KindNode, "node", measurev1.Path_PATH_HOST_TO_HOST},
		{measurev1.Path_PATH_HOST_TO_HOST, KindNode, "node", measurev1.Path_PATH_HOST_TO_HOST},
		{measurev1.Path_PATH_HOST_TO_POD, KindNode, "node", measurev1.Path_PATH_HOST_TO_HOST},
		{measurev1.Path_PATH_POD_TO_POD, KindNode, "node", measurev1.Path_PATH_HOST_TO_HOST},
		{measurev1.Path_PATH_POD_TO_SERVICE, KindNode, "node", measurev1.Path_PATH_HOST_TO_HOST},
		{measurev1.Path_PATH_HOST_TO_SERVICE, KindNode, "node", measurev1.Path_PATH_HOST_TO_HOST},
		{measurev1.Path_PATH_HOST_TO_EXTERNAL, KindTarget, "target", measurev1.Path_PATH_HOST_TO_EXTERNAL},
		{measurev1.Path_PATH_POD_TO_EXTERNAL, KindTarget, "target", measurev1.Path_PATH_HOST_TO_EXTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.path.String(), func(t *testing.T) {
			k := KindOf(tt.path)
			if k != tt.kind || k.String() != tt.name {
				t.Errorf("KindOf = %v (%d), want %v", k, k, tt.kind)
			}
			if got, want := k.InMesh(), tt.kind == KindNode; got != want {
				t.Errorf("InMesh = %v, want %v", got, want)
			}
			if got := k.Baseline(); got != tt.baseline {
				t.Errorf("Baseline = %v, want %v", got, tt.baseline)
			}
		})
	}
	if got := Kind(7).String(); got != "kind(7)" {
		t.Errorf("Kind(7).String() = %q", got)
	}
}

// TestSplitPaths: SplitPaths and Split part paths, and results, into
// those to nodes and those to targets, order kept.
func TestSplitPaths(t *testing.T) {
	ext, hh, pp, pe := measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD, measurev1.Path_PATH_POD_TO_EXTERNAL
	tests := []struct {
		name         string
		paths        []measurev1.Path
		node, target []measurev1.Path
	}{
		{"none", nil, nil, nil},
		{"nodes only", []measurev1.Path{pp, hh}, []measurev1.Path{pp, hh}, nil},
		{"targets only", []measurev1.Path{pe, ext}, nil, []measurev1.Path{pe, ext}},
		{"mixed, order kept", []measurev1.Path{pe, pp, ext, hh}, []measurev1.Path{pp, hh}, []measurev1.Path{pe, ext}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, target := SplitPaths(tt.paths)
			if !slices.Equal(node, tt.node) || !slices.Equal(target, tt.target) || (node == nil) != (tt.node == nil) || (target == nil) != (tt.target == nil) {
				t.Errorf("SplitPaths = %v, %v; want %v, %v", node, target, tt.node, tt.target)
			}
			// Split does the same for anything that names its path.
			var results []*measurev1.Result
			for _, p := range tt.paths {
				results = append(results, &measurev1.Result{Path: p, DstNode: "b"})
			}
			paths := func(rs []*measurev1.Result) (ps []measurev1.Path) {
				for _, r := range rs {
					ps = append(ps, r.GetPath())
				}
				return ps
			}
			rn, rt := Split(results)
			if !slices.Equal(paths(rn), tt.node) || !slices.Equal(paths(rt), tt.target) {
				t.Errorf("Split = %v, %v; want %v, %v", paths(rn), paths(rt), tt.node, tt.target)
			}
		})
	}
}

func TestApplies(t *testing.T) {
	tests := []struct {
		test measurev1.Test
		path measurev1.Path
		want bool
	}{
		{measurev1.Test_TEST_PING, measurev1.Path_PATH_HOST_TO_HOST, true},
		{measurev1.Test_TEST_PING, measurev1.Path_PATH_POD_TO_SERVICE, false},
		{measurev1.Test_TEST_PING, measurev1.Path_PATH_HOST_TO_SERVICE, false},
		{measurev1.Test_TEST_PING, measurev1.Path_PATH_POD_TO_EXTERNAL, true},
		{measurev1.Test_TEST_HTTP, measurev1.Path_PATH_HOST_TO_EXTERNAL, true},
		{measurev1.Test_TEST_HTTP_LOAD, measurev1.Path_PATH_HOST_TO_EXTERNAL, false},
		{measurev1.Test_TEST_HTTP_LOAD, measurev1.Path_PATH_POD_TO_SERVICE, true},
		{measurev1.Test_TEST_IPERF3_UDP, measurev1.Path_PATH_POD_TO_EXTERNAL, true},
		{measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Path_PATH_HOST_TO_EXTERNAL, true},
	}
	for _, tt := range tests {
		if got := Applies(tt.test, tt.path); got != tt.want {
			t.Errorf("Applies(%v, %v) = %v, want %v", tt.test, tt.path, got, tt.want)
		}
	}
}

func TestDestination(t *testing.T) {
	tests := []struct {
		name         string
		path         measurev1.Path
		dst          string
		node, target string
		ends         []End
		queued       []measurev1.Test // of ping, http, iperf3_tcp, qperf_tcp_bw
	}{
		{"node", measurev1.Path_PATH_POD_TO_POD, "b", "b", "",
			[]End{{Node: "a", Role: RoleSrc, Peer: "b"}, {Node: "b", Role: RoleDst, Peer: "a"}}, nil},
		{"node without a name", measurev1.Path_PATH_HOST_TO_HOST, "", "", "",
			[]End{{Node: "a", Role: RoleSrc}, {Node: "", Role: RoleDst, Peer: "a"}}, nil},
		{"target", measurev1.Path_PATH_HOST_TO_EXTERNAL, "lb", "", "lb",
			[]End{{Node: "a", Role: RoleSrc, Peer: "lb"}},
			[]measurev1.Test{measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_QPERF_TCP_BW}},
		{"target from a pod", measurev1.Path_PATH_POD_TO_EXTERNAL, "lb", "", "lb",
			[]End{{Node: "a", Role: RoleSrc, Peer: "lb"}},
			[]measurev1.Test{measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_QPERF_TCP_BW}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DestOf(&measurev1.PlannedTest{Path: tt.path, DstNode: tt.dst})
			if r := DestOf(&measurev1.Result{Path: tt.path, DstNode: tt.dst}); r != d {
				t.Errorf("DestOf(Result) = %+v, DestOf(PlannedTest) = %+v", r, d)
			}
			if d.Name() != tt.dst || d.String() != tt.dst || d.Node() != tt.node || d.Target() != tt.target {
				t.Errorf("Name, String, Node, Target = %q, %q, %q, %q; want %q, %q, %q, %q",
					d.Name(), d.String(), d.Node(), d.Target(), tt.dst, tt.dst, tt.node, tt.target)
			}
			if d.Kind() != KindOf(tt.path) || d.InMesh() != KindOf(tt.path).InMesh() {
				t.Errorf("Kind = %v, InMesh = %v; want those of %v", d.Kind(), d.InMesh(), tt.path)
			}
			if got := Pick(d, "node", "target"); got != KindOf(tt.path).String() {
				t.Errorf("Pick(node, target) = %q, want %q", got, KindOf(tt.path))
			}
			if got := d.Ends("a"); !slices.Equal(got, tt.ends) {
				t.Errorf("Ends(a) = %+v, want %+v", got, tt.ends)
			}
			var nodes []string
			for _, e := range tt.ends {
				nodes = append(nodes, e.Node)
			}
			if got := d.Nodes("a"); !slices.Equal(got, nodes) {
				t.Errorf("Nodes(a) = %q, want %q", got, nodes)
			}
			for _, test := range []measurev1.Test{measurev1.Test_TEST_PING, measurev1.Test_TEST_HTTP, measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_QPERF_TCP_BW} {
				if got, want := d.Queued(test), slices.Contains(tt.queued, test); got != want {
					t.Errorf("Queued(%v) = %v, want %v", test, got, want)
				}
			}
		})
	}
	if d := (Destination{}); d.Kind() != KindNode || d.Name() != "" {
		t.Errorf("zero Destination = %v %q, want a node without a name", d.Kind(), d.Name())
	}
}

// FuzzDestination checks, for any path and name, that a destination is
// a node or a target, that Name is what the wire said, and that Nodes
// are the nodes of Ends: the source first, the destination only if it is
// a node.
func FuzzDestination(f *testing.F) {
	f.Add(int32(measurev1.Path_PATH_POD_TO_POD), "a", "b")
	f.Add(int32(measurev1.Path_PATH_POD_TO_EXTERNAL), "a", "lb")
	f.Add(int32(99), "", "")
	f.Fuzz(func(t *testing.T, path int32, src, dst string) {
		d := DestinationOf(measurev1.Path(path), dst)
		if d.Name() != dst || (d.Node() == dst) == (d.Target() == dst) && dst != "" {
			t.Fatalf("Name %q, Node %q, Target %q for %q: want the name, as a node or as a target", d.Name(), d.Node(), d.Target(), dst)
		}
		ends, nodes := d.Ends(src), d.Nodes(src)
		if len(ends) != len(nodes) || ends[0].Node != src || ends[0].Role != RoleSrc || ends[0].Peer != dst {
			t.Fatalf("Ends(%q) = %+v, Nodes = %q", src, ends, nodes)
		}
		for i, e := range ends {
			if nodes[i] != e.Node {
				t.Fatalf("Nodes = %q, Ends = %+v", nodes, ends)
			}
		}
		if got, want := len(ends) == 2, d.InMesh(); got != want || want && (ends[1].Node != dst || ends[1].Role != RoleDst || ends[1].Peer != src) {
			t.Fatalf("Ends(%q) = %+v with InMesh %v", src, ends, want)
		}
	})
}

func TestDestinationEntry(t *testing.T) {
	lb, peer := &measurev1.ExternalTarget{Name: "lb"}, &measurev1.ExternalTarget{Name: "peer"}
	allowlist := []*measurev1.ExternalTarget{lb, peer}
	tests := []struct {
		name string
		path measurev1.Path
		dst  string
		want *measurev1.ExternalTarget
	}{
		{"allowed", measurev1.Path_PATH_HOST_TO_EXTERNAL, "peer", peer},
		{"allowed from a pod", measurev1.Path_PATH_POD_TO_EXTERNAL, "lb", lb},
		{"not allowed", measurev1.Path_PATH_HOST_TO_EXTERNAL, "db", nil},
		{"no name", measurev1.Path_PATH_HOST_TO_EXTERNAL, "", nil},
		{"a node named like a target", measurev1.Path_PATH_POD_TO_POD, "lb", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := DestinationOf(tt.path, tt.dst).Entry(allowlist)
			if got != tt.want || ok != (tt.want != nil) {
				t.Errorf("Entry = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
	if got, ok := DestinationOf(measurev1.Path_PATH_HOST_TO_EXTERNAL, "lb").Entry(nil); got != nil || ok {
		t.Errorf("Entry(nil) = %v, %v; want none", got, ok)
	}
}

func TestClientDestination(t *testing.T) {
	tests := []struct {
		externalTarget string
		kind           Kind
		target         string
	}{
		{"", KindNode, ""},
		{"lb", KindTarget, "lb"},
	}
	for _, tt := range tests {
		d := ClientDestination(tt.externalTarget)
		if d.Kind() != tt.kind || d.Target() != tt.target || d.Node() != "" {
			t.Errorf("ClientDestination(%q) = %v, target %q, node %q; want %v, target %q, no node",
				tt.externalTarget, d.Kind(), d.Target(), d.Node(), tt.kind, tt.target)
		}
	}
}
