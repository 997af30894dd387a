package runs

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/registry"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// instantAgents is a fleet of connected agents that answer every client
// at once with a plausible ping result, from a goroutine of their own as a
// session would.
type instantAgents struct {
	nodes []string
	addrs map[string]registry.Node
	byIP  map[string]string // node name by host IP
	// onAck, if set, is called with every acknowledgement.
	onAck func(node string, testIDs []string)

	mu       sync.Mutex
	inFlight map[string]int // clients running per node, as source or destination
	peak     int            // the most clients one node took part in at once
}

func newInstantAgents(n int) *instantAgents {
	a := &instantAgents{addrs: map[string]registry.Node{}, byIP: map[string]string{}}
	for i := range n {
		name := fmt.Sprintf("node-%04d", i)
		a.nodes = append(a.nodes, name)
		a.addrs[name] = registry.Node{Name: name, HostIP: netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)})}
		a.byIP[a.addrs[name].HostIP.String()] = name
	}
	return a
}

func (a *instantAgents) Known() (mesh, targetable []string) { return a.nodes, a.nodes }
func (a *instantAgents) Node(name string) (registry.Node, bool) {
	n, ok := a.addrs[name]
	return n, ok
}
func (a *instantAgents) GossipGone(string) ([]string, bool) { return nil, false }
func (a *instantAgents) Ack(node string, testIDs ...string) {
	if a.onAck != nil {
		a.onAck(node, testIDs)
	}
}
func (a *instantAgents) HandleLate(registry.LateHandler) {}
func (a *instantAgents) Dispatch(ctx context.Context, node string, w *agentv1.Work) (*agentv1.WorkResult, error) {
	dst := a.byIP[w.GetRunClient().GetTargetIp()]
	a.mu.Lock()
	if a.inFlight == nil {
		a.inFlight = map[string]int{}
	}
	for _, n := range []string{node, dst} {
		a.inFlight[n]++
		a.peak = max(a.peak, a.inFlight[n])
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inFlight[node]--
		a.inFlight[dst]--
		a.mu.Unlock()
	}()
	ch := make(chan *agentv1.WorkResult, 1)
	go func() {
		med := 100e-6
		ch <- &agentv1.WorkResult{WorkId: w.GetWorkId(), Status: measurev1.Status_STATUS_OK,
			Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{
				Spec: w.GetRunClient().GetSpec(), Status: measurev1.Status_STATUS_OK, StartTime: timestamppb.Now(),
				Elapsed: durationpb.New(time.Millisecond), TargetAddress: w.GetRunClient().GetTargetIp(),
				Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5,
					RttMinSeconds: 80e-6, RttAvgSeconds: med, RttMaxSeconds: 150e-6, RttMedianSeconds: &med}},
			}}}}}
	}()
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *instantAgents) Send(context.Context, string, *agentv1.Work) error { return nil }
