package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// servers: srv has an iperf3 and a qperf server behind it, v3 an iperf3
// one only, bare none.
var servers = []*measurev1.ExternalTarget{
	{Name: "bare", Address: "192.0.2.20"},
	{Name: "srv", Address: "192.0.2.21", Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766},
	{Name: "v3", Address: "192.0.2.22", Iperf3Port: 15201},
}

func withServers(nodes []string) Nodes {
	return Nodes{Mesh: nodes, Targetable: nodes, External: servers}
}

func TestAppliesToServers(t *testing.T) {
	for _, test := range testspec.Tests() {
		tool := testspec.Tool(test)
		for _, target := range servers {
			want := test == measurev1.Test_TEST_PING ||
				tool == measurev1.Tool_TOOL_IPERF3 && target.GetIperf3Port() != 0 ||
				tool == measurev1.Tool_TOOL_QPERF && target.GetQperfPort() != 0
			if got := AppliesTo(test, target); got != want {
				t.Errorf("AppliesTo(%v, %s) = %v, want %v", test, target.GetName(), got, want)
			}
			if why := NotApplying(test, target); (why == "") != want || !want && !strings.Contains(why, target.GetName()) &&
				!strings.Contains(why, "does not run") {
				t.Errorf("NotApplying(%v, %s) = %q", test, target.GetName(), why)
			}
		}
	}
}

// iperf3 and qperf run to the targets with their ports only, from every
// node on both external paths; a default run skips them elsewhere.
func TestPlanServers(t *testing.T) {
	three := []string{"a", "b", "c"}
	iperf, qbw, ping := &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP}, &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_BW},
		&measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	ext := []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL, measurev1.Path_PATH_POD_TO_EXTERNAL}
	tests := []struct {
		name    string
		spec    *measurev1.RunSpec
		want    map[string]int // planned tests per "target test"
		wantErr string
	}{
		{"iperf3 and qperf to all", &measurev1.RunSpec{Repeats: 1, Tests: []*measurev1.TestSpec{ping, iperf, qbw}, Paths: ext,
			ExternalTargets: []string{"bare", "srv", "v3"}},
			map[string]int{"bare ping": 6, "srv ping": 6, "v3 ping": 6, "srv iperf3_tcp": 6, "v3 iperf3_tcp": 6, "srv qperf_tcp_bw": 6}, ""},
		{"defaults", &measurev1.RunSpec{Repeats: 1, Paths: ext[:1], ExternalTargets: []string{"bare", "v3"}},
			map[string]int{"bare ping": 3, "v3 ping": 3, "v3 iperf3_tcp": 3}, ""},
		{"qperf to an iperf3-only target", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{ping, qbw}, Paths: ext, ExternalTargets: []string{"v3", "bare"}},
			nil, `tests[1] qperf_tcp_bw runs nowhere: external target "v3" has no qperf_port and qperf_data_port`},
		{"iperf3 to a bare target", &measurev1.RunSpec{Tests: []*measurev1.TestSpec{iperf}, Paths: ext[1:], ExternalTargets: []string{"bare"}},
			nil, `tests[0] iperf3_tcp runs nowhere: external target "bare" has no iperf3_port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planned, err := Plan(tt.spec, withServers(three))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(fmt.Sprint(err), tt.wantErr) {
					t.Fatalf("err = %v, want ErrInvalid containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, pt := range planned {
				got[pt.GetDstNode()+" "+testspec.Name(pt.GetSpec().GetTest())]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("planned %v, want %v", got, tt.want)
			}
		})
	}
}

// The heavy tests to external targets queue per target, none in the
// rounds nor among the light tests; node rounds stay optimal.
func TestArrangeServers(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	spec := &measurev1.RunSpec{Repeats: 2, Tests: []*measurev1.TestSpec{
		{Test: measurev1.Test_TEST_PING}, {Test: measurev1.Test_TEST_IPERF3_TCP}, {Test: measurev1.Test_TEST_QPERF_TCP_LAT},
	}, ExternalTargets: []string{"srv", "v3", "bare"}}
	planned, err := Plan(spec, withServers(nodes))
	if err != nil {
		t.Fatal(err)
	}
	a := Arrange(planned, nil)
	if got, want := len(a.Rounds), OptimalRounds(len(nodes)); got != want {
		t.Errorf("%d rounds, want %d", got, want)
	}
	seen := 0
	for _, round := range a.Rounds {
		for _, s := range round {
			seen += len(s.Tests)
			for _, pt := range s.Tests {
				if testspec.IsExternal(pt.GetPath()) {
					t.Errorf("%s to %s in a round", pt.GetTestId(), pt.GetDstNode())
				}
			}
		}
	}
	for _, pt := range a.Light {
		seen++
		if testspec.IsHeavy(pt.GetSpec().GetTest()) {
			t.Errorf("heavy %s among the light tests", pt.GetTestId())
		}
	}
	// 4 nodes x 2 paths x 2 repeats: srv iperf3 + qperf, v3 iperf3.
	wantQueues := map[string]int{"srv": 4 * 2 * 2 * 2, "v3": 4 * 2 * 2}
	if len(a.External) != len(wantQueues) {
		t.Fatalf("%d external queues, want %d", len(a.External), len(wantQueues))
	}
	for _, q := range a.External {
		seen += len(q.Tests)
		if len(q.Tests) != wantQueues[q.Target] {
			t.Errorf("queue %s: %d tests, want %d", q.Target, len(q.Tests), wantQueues[q.Target])
		}
		last := ""
		for _, pt := range q.Tests {
			if pt.GetDstNode() != q.Target || !testspec.IsHeavy(pt.GetSpec().GetTest()) || !testspec.IsExternal(pt.GetPath()) {
				t.Errorf("queue %s holds %s: %s %v %v", q.Target, pt.GetTestId(), pt.GetDstNode(), pt.GetPath(), pt.GetSpec().GetTest())
			}
			if pt.GetTestId() <= last {
				t.Errorf("queue %s: %s after %s, want plan order", q.Target, pt.GetTestId(), last)
			}
			last = pt.GetTestId()
		}
	}
	if seen != len(planned) {
		t.Errorf("%d tests arranged, %d planned", seen, len(planned))
	}
}

// One client at a time per external server, over every run: a heavy test
// holds its source and the target's key.
func TestGateServers(t *testing.T) {
	g := NewGate(0)
	rel, ok := g.TryAcquire(true, "a", GateKey("srv"))
	if !ok {
		t.Fatal("a->srv refused on an idle gate")
	}
	if _, ok := g.TryAcquire(true, "b", GateKey("srv")); ok {
		t.Error("b->srv admitted while a->srv runs")
	}
	if r, ok := g.TryAcquire(true, "b", GateKey("v3")); !ok {
		t.Error("b->v3 refused beside a->srv")
	} else {
		r()
	}
	rel()
	if r, ok := g.TryAcquire(true, "b", GateKey("srv")); !ok {
		t.Error("b->srv refused after a->srv ended")
	} else {
		r()
	}
}
