package schedule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestPlanCounts(t *testing.T) {
	three := []string{"node-1", "node-2", "node-3"}
	tests := []struct {
		name  string
		spec  *measurev1.RunSpec
		ready []string
		want  int
	}{
		// 6 ordered pairs x (ping: 3 paths (not pod-service) x 3 repeats +
		// qperf tcp_lat, tcp_bw, iperf3: 4 paths x 1 + http: 4 paths x 5).
		{"defaults", &measurev1.RunSpec{}, three, 6 * (3*3 + 3*4 + 4*5)},
		{"one repeat", &measurev1.RunSpec{Repeats: 1}, three, 6 * (3*5 + 4)},
		{"repeats", &measurev1.RunSpec{Repeats: 3, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_HTTP}}}, three, 3 * 6 * 4},
		{"one pair", &measurev1.RunSpec{Repeats: 1, Pairs: []*measurev1.NodePair{{SrcNode: "node-2", DstNode: "node-1"}}}, three, 3*5 + 4},
		{"ping on service paths only", &measurev1.RunSpec{Repeats: 1,
			Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_HTTP}},
			Paths: []measurev1.Path{measurev1.Path_PATH_POD_TO_SERVICE, measurev1.Path_PATH_HOST_TO_SERVICE},
		}, []string{"a", "b"}, 2 * 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.spec, all(tt.ready))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Fatalf("%d planned tests, want %d", len(got), tt.want)
			}
			ids := map[string]bool{}
			for _, pt := range got {
				if ids[pt.GetTestId()] {
					t.Errorf("duplicate test ID %s", pt.GetTestId())
				}
				ids[pt.GetTestId()] = true
				if pt.GetSrcNode() == pt.GetDstNode() {
					t.Errorf("%s: source and destination are both %s", pt.GetTestId(), pt.GetSrcNode())
				}
				if pt.GetSpec().GetParams() == nil {
					t.Errorf("%s: spec not normalized: %v", pt.GetTestId(), pt.GetSpec())
				}
				if !Applies(pt.GetSpec().GetTest(), pt.GetPath()) {
					t.Errorf("%s: %v planned on %v", pt.GetTestId(), pt.GetSpec().GetTest(), pt.GetPath())
				}
			}
		})
	}
}

// all is a Nodes where every node is in the mesh.
func all(nodes []string) Nodes { return Nodes{Mesh: nodes, Targetable: nodes} }

// A node in maintenance is left out of default meshes but may be named.
func TestPlanMaintenance(t *testing.T) {
	nodes := Nodes{Mesh: []string{"a", "b"}, Targetable: []string{"a", "b", "m"}}
	spec := &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
		Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}
	got, err := Plan(spec, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range got {
		if pt.GetSrcNode() == "m" || pt.GetDstNode() == "m" {
			t.Errorf("default mesh includes node m in maintenance: %v", pt)
		}
	}
	if len(got) != 2 {
		t.Errorf("%d tests, want 2 (a->b, b->a)", len(got))
	}
	spec.Pairs = []*measurev1.NodePair{{SrcNode: "a", DstNode: "m"}}
	if got, err := Plan(spec, nodes); err != nil || len(got) != 1 {
		t.Errorf("a run naming m: %d tests, %v; want 1", len(got), err)
	}
	spec.Pairs = []*measurev1.NodePair{{SrcNode: "a", DstNode: "gone"}}
	if _, err := Plan(spec, nodes); !errors.Is(err, ErrInvalid) {
		t.Errorf("a departed node: err = %v, want ErrInvalid", err)
	}
}

func TestPlanCoversEveryOrderedPairOnce(t *testing.T) {
	for n := 2; n <= 8; n++ {
		var ready []string
		for i := 1; i <= n; i++ {
			ready = append(ready, fmt.Sprintf("node-%d", i))
		}
		got, err := Plan(&measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_IPERF3_TCP}},
			Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST}}, all(ready))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[[2]string]int{}
		for _, pt := range got {
			seen[[2]string{pt.GetSrcNode(), pt.GetDstNode()}]++
		}
		if len(seen) != n*(n-1) {
			t.Errorf("n=%d: %d distinct pairs, want %d", n, len(seen), n*(n-1))
		}
		for p, c := range seen {
			if c != 1 {
				t.Errorf("n=%d: pair %v planned %d times", n, p, c)
			}
		}
	}
}

func TestPlanRefuses(t *testing.T) {
	ready := []string{"node-1", "node-2"}
	pair := func(s, d string) []*measurev1.NodePair { return []*measurev1.NodePair{{SrcNode: s, DstNode: d}} }
	tests := []struct {
		name    string
		spec    *measurev1.RunSpec
		ready   []string
		wantErr error
	}{
		{"one node", &measurev1.RunSpec{}, ready[:1], ErrNoPairs},
		{"no node", &measurev1.RunSpec{}, nil, ErrNoPairs},
		{"pair with itself", &measurev1.RunSpec{Pairs: pair("node-1", "node-1")}, ready, ErrInvalid},
		{"unknown source", &measurev1.RunSpec{Pairs: pair("node-9", "node-1")}, ready, ErrInvalid},
		{"unknown destination", &measurev1.RunSpec{Pairs: pair("node-1", "node-9")}, ready, ErrInvalid},
		{"pair twice", &measurev1.RunSpec{Pairs: append(pair("node-1", "node-2"), pair("node-1", "node-2")...)}, ready, ErrInvalid},
		{"unknown path", &measurev1.RunSpec{Paths: []measurev1.Path{42}}, ready, ErrInvalid},
		{"unspecified path", &measurev1.RunSpec{Paths: []measurev1.Path{0}}, ready, ErrInvalid},
		{"unspecified test", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{{}}}, ready, ErrInvalid},
		{"too many repeats", &measurev1.RunSpec{Repeats: MaxRepeats + 1}, ready, ErrInvalid},
		{"nothing applies", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING}},
			Paths: []measurev1.Path{measurev1.Path_PATH_POD_TO_SERVICE}}, ready, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Plan(tt.spec, all(tt.ready))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestGate(t *testing.T) {
	g := NewGate(2)
	relAB, ok := g.TryAcquire(true, "a", "b")
	if !ok {
		t.Fatal("heavy a-b refused on an idle gate")
	}
	relCD, ok := g.TryAcquire(true, "c", "d")
	if !ok {
		t.Fatal("heavy c-d refused beside a-b")
	}
	for _, s := range [][2]string{{"b", "c"}, {"a", "e"}, {"e", "d"}} {
		if rel, ok := g.TryAcquire(true, s[0], s[1]); ok {
			rel()
			t.Errorf("heavy %s-%s admitted beside heavy a-b and c-d", s[0], s[1])
		}
	}
	// Light tests run beside heavy ones, at most 2 per node.
	l1, ok1 := g.TryAcquire(false, "a", "c")
	l2, ok2 := g.TryAcquire(false, "a", "d")
	if !ok1 || !ok2 {
		t.Fatal("light tests refused beside heavy ones")
	}
	if _, ok := g.TryAcquire(false, "a", "e"); ok {
		t.Error("a third light test on a admitted with maxLight 2")
	}
	changed := g.Changed()
	l1()
	select {
	case <-changed:
	default:
		t.Error("release did not signal Changed")
	}
	l1() // twice is harmless
	if rel, ok := g.TryAcquire(false, "a", "e"); !ok {
		t.Error("light a-e refused after a light test on a ended")
	} else {
		rel()
	}
	l2()

	// Acquire waits for the release.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		rel, err := g.Acquire(ctx, true, "b", "c")
		if err == nil {
			rel()
		}
		got <- err
	}()
	relAB()
	relCD()
	if err := <-got; err != nil {
		t.Errorf("Acquire after release: %v", err)
	}
	short, cancelShort := context.WithCancel(ctx)
	hold, _ := g.TryAcquire(true, "x", "y")
	cancelShort()
	if _, err := g.Acquire(short, true, "x", "z"); err == nil {
		t.Error("Acquire on a held node returned without error after its context ended")
	}
	hold()
}

// A waiting Acquire is woken by a release of one of its own nodes only,
// and gets its test through once that node is free again.
func TestGateAcquireWaitsForItsNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g := NewGate(1)
	relA, _ := g.TryAcquire(false, "a", "x")
	relB, _ := g.TryAcquire(false, "b", "y")
	got := make(chan error, 1)
	go func() {
		rel, err := g.Acquire(ctx, false, "a", "b")
		if err == nil {
			rel()
		}
		got <- err
	}()
	// Wait until the Acquire is registered with its nodes.
	for {
		g.mu.Lock()
		n := len(g.waiting["a"]) + len(g.waiting["b"])
		g.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	relOther, _ := g.TryAcquire(false, "c", "d")
	relOther() // not its nodes
	relA()     // b is still taken
	select {
	case err := <-got:
		t.Fatalf("Acquire(a, b) returned (%v) while b is taken", err)
	case <-time.After(20 * time.Millisecond):
	}
	relB()
	if err := <-got; err != nil {
		t.Fatalf("Acquire(a, b) after both were released: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) != 0 || len(g.light) != 0 {
		t.Errorf("gate not empty after every release: waiting %v, light %v", g.waiting, g.light)
	}
}
