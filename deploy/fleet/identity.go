package fleet

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds who a simulated agent is and how it joins: its node
// name and made-up loopback addresses, its Register and the coordinator's
// Registered, and the fleet's join order (which its gossip views follow).

// agentStream is one session's stream of the agent protocol.
type agentStream = grpc.BidiStreamingClient[agentv1.ConnectRequest, agentv1.ConnectResponse]

// NodeName is the name of the fleet's i-th node.
func NodeName(i int) string { return fmt.Sprintf("sim-%05d", i) }

// nodeIndex is NodeName's inverse; -1 if name is none of the fleet's.
func nodeIndex(name string) int {
	if len(name) != 9 || name[:4] != "sim-" {
		return -1
	}
	i, err := strconv.Atoi(name[4:])
	if err != nil {
		return -1
	}
	return i
}

// hostIP and podIP are the made-up loopback addresses of node i: the
// coordinator checks them and never sends to them.
func hostIP(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }
func podIP(i int) string  { return fmt.Sprintf("127.2.%d.%d", i/250, i%250+1) }

// register is the agent's Register: its host and pod addresses, the
// default probe and HTTP ports, and the gossip port with Config.Gossip.
func (a *simAgent) register() *agentv1.Register {
	reg := &agentv1.Register{
		NodeName: a.name, AgentVersion: "fleet", ProtocolVersion: protocol.Version,
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: hostIP(a.i), MtuBytes: 1500},
			{Network: measurev1.Network_NETWORK_POD, Ip: podIP(a.i), MtuBytes: 1450},
		},
		ProbePort: protocol.DefaultProbePort, HttpPort: protocol.DefaultHTTPPort,
	}
	if a.f.cfg.Gossip {
		reg.GossipPort = protocol.DefaultGossipPort
	}
	return reg
}

// connect opens a stream on conn, registers, and returns the stream with
// the coordinator's Registered; the stream lives as long as ctx. An
// answer other than Registered is an error.
func (a *simAgent) connect(ctx context.Context, conn *grpc.ClientConn) (agentStream, *agentv1.Registered, error) {
	stream, err := agentv1.NewAgentServiceClient(conn).Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := stream.Send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: a.register()}}); err != nil {
		return nil, nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	r := first.GetRegistered()
	if r == nil {
		return nil, nil, fmt.Errorf("answer %T, not Registered", first.GetMsg())
	}
	return stream, r, nil
}

// join puts a in the fleet's join order at its first registration and
// returns how many agents registered before it then; at a later
// registration, how many registered so far.
func (f *Fleet) join(a *simAgent) int {
	if a.joined {
		return int(f.joins.Load())
	}
	a.joined = true
	k := f.joins.Add(1) - 1
	f.joinOrder[k].Store(int32(a.i) + 1)
	return int(k)
}
