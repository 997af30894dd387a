package diagnose

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

var (
	probePaths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST, measurev1.Path_PATH_POD_TO_POD}
	probeKinds = []agentv1.ProbeKind{agentv1.ProbeKind_PROBE_KIND_ICMP, agentv1.ProbeKind_PROBE_KIND_ICMP_MTU, agentv1.ProbeKind_PROBE_KIND_TCP}
)

// feedMesh adds one window of a full mesh of n nodes; lost says whether a
// summary lost its probes, rtt its median.
func feedMesh(j *ProbeJudge, n int, lost func(src, dst string, p measurev1.Path, k agentv1.ProbeKind) bool,
	rtt func(src, dst string) float64) {
	for i := range n {
		for d := range n {
			if i == d {
				continue
			}
			src, dst := fmt.Sprintf("node-%d", i+1), fmt.Sprintf("node-%d", d+1)
			for _, p := range probePaths {
				for _, k := range probeKinds {
					s := &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: dst}, Path: p, Kind: k, Sent: 6, Received: 6,
						Status: measurev1.Status_STATUS_OK}
					if lost(src, dst, p, k) {
						s.Received, s.Status, s.Message = 0, measurev1.Status_STATUS_TIMEOUT, "no answer"
					} else {
						m := rtt(src, dst)
						s.RttMinSeconds, s.RttMedianSeconds, s.RttP90Seconds, s.RttMaxSeconds = m, m, m, m
					}
					j.Add(src, s)
				}
			}
		}
	}
}

func TestProbeJudge(t *testing.T) {
	involves := func(node, src, dst string) bool { return src == node || dst == node }
	flat := func(string, string) float64 { return 100e-6 }
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name     string
		lost     func(src, dst string, p measurev1.Path, k agentv1.ProbeKind) bool
		rtt      func(src, dst string) float64
		wantNode string // "" for no finding
		wantKind Kind
	}{
		{"clean", func(string, string, measurev1.Path, agentv1.ProbeKind) bool { return false }, flat, "", ""},
		{"noise is no fault", func(string, string, measurev1.Path, agentv1.ProbeKind) bool { return rng.Float64() < 0.1 }, flat, "", ""},
		{"pod network", func(src, dst string, p measurev1.Path, _ agentv1.ProbeKind) bool {
			return involves("node-3", src, dst) && p == measurev1.Path_PATH_POD_TO_POD
		}, flat, "node-3", KindPodNetwork},
		{"icmp dropped", func(src, dst string, _ measurev1.Path, k agentv1.ProbeKind) bool {
			return involves("node-2", src, dst) && k != agentv1.ProbeKind_PROBE_KIND_TCP
		}, flat, "node-2", KindICMP},
		{"mtu black hole", func(src, dst string, p measurev1.Path, k agentv1.ProbeKind) bool {
			return involves("node-4", src, dst) && k == agentv1.ProbeKind_PROBE_KIND_ICMP_MTU && p == measurev1.Path_PATH_HOST_TO_HOST
		}, flat, "node-4", KindMTU},
		{"mtu black hole on the pod network", func(src, dst string, p measurev1.Path, k agentv1.ProbeKind) bool {
			return involves("node-3", src, dst) && k == agentv1.ProbeKind_PROBE_KIND_ICMP_MTU && p == measurev1.Path_PATH_POD_TO_POD
		}, flat, "node-3", KindMTU},
		{"agent gone", func(src, dst string, p measurev1.Path, k agentv1.ProbeKind) bool {
			return involves("node-1", src, dst) && k == agentv1.ProbeKind_PROBE_KIND_TCP
		}, flat, "node-1", KindAgentGone},
		{"unreachable", func(src, dst string, _ measurev1.Path, _ agentv1.ProbeKind) bool {
			return involves("node-5", src, dst)
		}, flat, "node-5", KindUnreachable},
		{"slow", func(string, string, measurev1.Path, agentv1.ProbeKind) bool { return false }, func(src, dst string) float64 {
			if involves("node-6", src, dst) {
				return 5e-3
			}
			return 100e-6
		}, "node-6", KindLatency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewProbeJudge()
			feedMesh(j, 6, tt.lost, tt.rtt)
			got := j.Judge()
			if tt.wantNode == "" {
				if len(got) != 0 {
					t.Fatalf("findings %v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Node != tt.wantNode || got[0].Kind != tt.wantKind {
				t.Fatalf("findings %v, want one: %s %s", got, tt.wantNode, tt.wantKind)
			}
			if tt.wantKind != KindLatency && len(got[0].Bad) == 0 {
				t.Errorf("finding %v quotes no bad summary", got[0])
			}
			if again := j.Judge(); len(again) != 0 {
				t.Errorf("the next, empty window judged %v: Judge must start a new window", again)
			}
		})
	}
}

// BenchmarkProbeJudge1000 judges one window of a 1,000-node mesh (2 paths
// x 3 kinds: 6 million summaries) and reports the time of Judge alone.
func BenchmarkProbeJudge1000(b *testing.B) {
	var judge time.Duration
	for range b.N {
		j := NewProbeJudge()
		feedMesh(j, 1000, func(src, dst string, _ measurev1.Path, _ agentv1.ProbeKind) bool {
			return src == "node-7" || dst == "node-7"
		},
			func(string, string) float64 { return 100e-6 })
		t := time.Now()
		if got := j.Judge(); len(got) != 1 {
			b.Fatalf("findings %v, want node-7", got)
		}
		judge += time.Since(t)
	}
	b.ReportMetric(float64(judge.Microseconds())/1000/float64(b.N), "judge_ms")
}
