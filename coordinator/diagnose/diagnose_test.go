package diagnose

import (
	"fmt"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var (
	tests = []measurev1.Test{measurev1.Test_TEST_PING, measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_IPERF3_TCP}
	paths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD}
)

// fault says what happens to one result; nil means healthy.
type fault func(src, dst string, path measurev1.Path, test measurev1.Test) (status measurev1.Status, scale float64)

// mesh builds a full mesh of results over n nodes, two samples per cell,
// with small deterministic spread, shaped by f.
func mesh(n int, f fault) []*measurev1.Result {
	var rs []*measurev1.Result
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			if i == j {
				continue
			}
			src, dst := fmt.Sprintf("node-%d", i), fmt.Sprintf("node-%d", j)
			for _, p := range paths {
				for _, t := range tests {
					for k := 0; k < 2; k++ {
						st, scale := measurev1.Status_STATUS_OK, 1.0
						if f != nil {
							st, scale = f(src, dst, p, t)
						}
						spread := 1 + 0.05*float64((i*7+j*3+k)%5)/4 // up to 5% apart
						r := &measurev1.Result{SrcNode: src, DstNode: dst, Path: p, Spec: &measurev1.TestSpec{Test: t}, Status: st}
						if st == measurev1.Status_STATUS_OK {
							switch t {
							case measurev1.Test_TEST_PING:
								r.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 100e-6 * spread * scale}}
							case measurev1.Test_TEST_QPERF_TCP_LAT:
								r.Metrics = &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{LatencySeconds: 20e-6 * spread * scale}}
							default:
								r.Metrics = &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 10e9 * spread * scale}}
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

func on(node string) func(src, dst string) bool {
	return func(src, dst string) bool { return src == node || dst == node }
}

func TestDiagnose(t *testing.T) {
	ok := measurev1.Status_STATUS_OK
	cases := []struct {
		name  string
		nodes int
		f     fault
		want  string // "node kind", or "" for no finding
	}{
		{"clean mesh", 4, nil, ""},
		{"clean small mesh", 3, nil, ""},
		{"pod traffic dropped on node-2", 4, func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && p == measurev1.Path_PATH_POD_TO_POD {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, "node-2 pod-network"},
		{"ICMP dropped on node-3", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-3")(s, d) && t == measurev1.Test_TEST_PING {
				return measurev1.Status_STATUS_UNREACHABLE, 0
			}
			return ok, 1
		}, "node-3 icmp-blocked"},
		{"VXLAN MTU black hole on node-2: pod paths only", 3, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP && p == measurev1.Path_PATH_POD_TO_POD {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, "node-2 mtu-blackhole"},
		{"MTU black hole on node-2", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, "node-2 mtu-blackhole"},
		{"node-4 rate-limited", 4, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-4")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP {
				return ok, 0.01
			}
			return ok, 1
		}, "node-4 bandwidth-degraded"},
		{"node-3 rate-limited, 3 nodes", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-3")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP {
				return ok, 0.05
			}
			return ok, 1
		}, "node-3 bandwidth-degraded"},
		{"agent on node-1 gone", 3, func(s, d string, _ measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
			if on("node-1")(s, d) {
				return measurev1.Status_STATUS_AGENT_UNAVAILABLE, 0
			}
			return ok, 1
		}, "node-1 agent-gone"},
		{"one flaky pair is no fault", 4, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if s == "node-1" && d == "node-2" && p == measurev1.Path_PATH_HOST_TO_HOST && t == measurev1.Test_TEST_PING {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, ""},
		{"busy is never a fault", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP {
				return measurev1.Status_STATUS_BUSY, 0
			}
			return ok, 1
		}, ""},
		{"canceled is never a fault", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP {
				return measurev1.Status_STATUS_CANCELED, 0 // a canceled run's tests
			}
			return ok, 1
		}, ""},
		{"noise: two slow pairs of one node is no fault", 3, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if (s == "node-1" && d == "node-3" || s == "node-2" && d == "node-1") && p == measurev1.Path_PATH_HOST_TO_HOST && t == measurev1.Test_TEST_IPERF3_TCP {
				return ok, 0.25
			}
			return ok, 1
		}, ""},
		{"noise: RTT 4x but under 1 ms more is no fault", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && t == measurev1.Test_TEST_PING {
				return ok, 4
			}
			return ok, 1
		}, ""},
		{"RTT 30x (3 ms) on node-2", 3, func(s, d string, _ measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if on("node-2")(s, d) && t == measurev1.Test_TEST_PING {
				return ok, 30
			}
			return ok, 1
		}, "node-2 latency-degraded"},
		{"one direction failing is a fault", 3, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if s == "node-1" && t == measurev1.Test_TEST_IPERF3_TCP && p == measurev1.Path_PATH_POD_TO_POD {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, "node-1 mtu-blackhole"},
		{"half of a node's pairs degraded is no fault", 3, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			if s == "node-1" && t == measurev1.Test_TEST_IPERF3_TCP {
				return ok, 0.1
			}
			return ok, 1
		}, ""},
		{"noise beside a rate limit does not hide it", 3, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			switch {
			case on("node-3")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP:
				return ok, 0.02
			// Slow pings on pairs without node-3 (noise) must not dilute it.
			case s == "node-1" && d == "node-2" && p == measurev1.Path_PATH_HOST_TO_HOST && t == measurev1.Test_TEST_PING,
				s == "node-2" && d == "node-1" && p == measurev1.Path_PATH_POD_TO_POD && t == measurev1.Test_TEST_PING:
				return ok, 30
			}
			return ok, 1
		}, "node-3 bandwidth-degraded"},
		{"ping failing on pod paths only, nothing else measured there: pod network", 3, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			switch {
			case t != measurev1.Test_TEST_PING && p == measurev1.Path_PATH_POD_TO_POD:
				return measurev1.Status_STATUS_BUSY, 0 // not measured
			case on("node-2")(s, d) && t == measurev1.Test_TEST_PING && p == measurev1.Path_PATH_POD_TO_POD:
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, "node-2 pod-network"},
		{"pod network broken on two nodes of four", 4, func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
			if (on("node-1")(s, d) || on("node-2")(s, d)) && p == measurev1.Path_PATH_POD_TO_POD {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, "node-1 pod-network; node-2 pod-network"},
		{"MTU on node-1 and ICMP on node-3 of four", 4, func(s, d string, p measurev1.Path, t measurev1.Test) (measurev1.Status, float64) {
			switch {
			case on("node-1")(s, d) && t == measurev1.Test_TEST_IPERF3_TCP && p == measurev1.Path_PATH_POD_TO_POD:
				return measurev1.Status_STATUS_TIMEOUT, 0
			case on("node-3")(s, d) && t == measurev1.Test_TEST_PING:
				return measurev1.Status_STATUS_UNREACHABLE, 0
			}
			return ok, 1
		}, "node-3 icmp-blocked; node-1 mtu-blackhole"},
		{"one broken link between two nodes of four is no node's fault", 4, func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
			if (s == "node-1" && d == "node-2" || s == "node-2" && d == "node-1") && p == measurev1.Path_PATH_POD_TO_POD {
				return measurev1.Status_STATUS_TIMEOUT, 0
			}
			return ok, 1
		}, ""},
		{"two nodes cannot be told apart", 2, func(s, d string, _ measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
			return measurev1.Status_STATUS_TIMEOUT, 0
		}, ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			fs := Diagnose(mesh(tt.nodes, tt.f))
			var got []string
			for _, f := range fs {
				got = append(got, fmt.Sprintf("%s %s", f.Node, f.Kind))
			}
			if strings.Join(got, "; ") != tt.want {
				t.Errorf("findings %q, want %q\n%s", got, tt.want, Summary(fs))
			}
		})
	}
}

// TestDiagnoseUnnamedNodes: results that do not name two different nodes
// (a damaged or foreign record) neither hide a fault nor are one.
func TestDiagnoseUnnamedNodes(t *testing.T) {
	podDrop2 := func(s, d string, p measurev1.Path, _ measurev1.Test) (measurev1.Status, float64) {
		if on("node-2")(s, d) && p == measurev1.Path_PATH_POD_TO_POD {
			return measurev1.Status_STATUS_TIMEOUT, 0
		}
		return measurev1.Status_STATUS_OK, 1
	}
	// odd returns failed results from src to every node of a 4-node mesh
	// and back, on every path and test.
	odd := func(src string) []*measurev1.Result {
		var rs []*measurev1.Result
		for i := 1; i <= 4; i++ {
			n := fmt.Sprintf("node-%d", i)
			for _, p := range paths {
				for _, te := range tests {
					for _, pair := range [][2]string{{src, n}, {n, src}} {
						s, d := pair[0], pair[1]
						if s == "=" {
							s = n
						}
						if d == "=" {
							d = n
						}
						rs = append(rs, &measurev1.Result{SrcNode: s, DstNode: d, Path: p, Spec: &measurev1.TestSpec{Test: te}, Status: measurev1.Status_STATUS_TIMEOUT})
					}
				}
			}
		}
		return rs
	}
	cases := []struct {
		name string
		rs   []*measurev1.Result
		want string
	}{
		{"failures without a node name beside pod-drop on node-2", append(mesh(4, podDrop2), odd("")...), "node-2 pod-network"},
		{"failures of each node with itself beside pod-drop on node-2", append(mesh(4, podDrop2), odd("=")...), "node-2 pod-network"},
		{"failures without a node name on a clean mesh", append(mesh(4, nil), odd("")...), ""},
		{"results without a spec or names", append(mesh(3, podDrop2), &measurev1.Result{}, nil), "node-2 pod-network"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			fs := Diagnose(tt.rs)
			var got []string
			for _, f := range fs {
				got = append(got, fmt.Sprintf("%s %s", f.Node, f.Kind))
			}
			if strings.Join(got, "; ") != tt.want {
				t.Errorf("findings %q, want %q\n%s", got, tt.want, Summary(fs))
			}
		})
	}
}
