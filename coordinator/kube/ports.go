package kube

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshperf/meshperf/internal/protocol"
)

// Port is one port of a node's Service and EndpointSlice.
type Port struct {
	// Name is the port's name, a DNS-1123 label of at most 15 characters,
	// unique within the Service.
	Name string
	// Port is the port number, the same on the ClusterIP and on the pod.
	Port int32
	// Protocol is TCP or UDP.
	Protocol corev1.Protocol
}

// ServicePorts returns the ports of a node's Service and EndpointSlice for
// the server ports its agent registered: iperf3 on TCP (control and data)
// and UDP (iperf3_udp), qperf's listener on TCP, qperf's data port on TCP
// and UDP, the HTTP target on TCP and the continuous probes' TCP echo
// responder on TCP, the target of the tcp probes on the service paths. A
// zero port is a server the agent does not run, and gets no port. Two
// servers on one port is an error naming both (protocol.ServerPorts.Check).
func ServicePorts(p protocol.ServerPorts) ([]Port, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	var out []Port
	for _, s := range []struct {
		name string
		port uint16
		udp  bool
	}{{"iperf3", p.Iperf3, true}, {"qperf", p.Qperf, false}, {"qperf-data", p.QperfData, true}, {"http", p.HTTP, false}, {"probe-echo", p.Probe, false}} {
		switch {
		case s.port == 0:
		case s.udp:
			out = append(out, Port{Name: s.name + "-tcp", Port: int32(s.port), Protocol: corev1.ProtocolTCP},
				Port{Name: s.name + "-udp", Port: int32(s.port), Protocol: corev1.ProtocolUDP})
		default:
			out = append(out, Port{Name: s.name, Port: int32(s.port), Protocol: corev1.ProtocolTCP})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the agent registered no server port")
	}
	return out, nil
}
