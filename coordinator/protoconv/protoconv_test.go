package protoconv

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// TestSharedMessages: measure.v1's NetworkAddress, ToolInfo and
// ExternalTarget, which replaced a copy of each in agent.v1, mesh.v1 and
// store.v1, have those copies' fields (number, name, kind, enum), so the
// bytes and the JSON of registrations, records, Endpoints and the API's
// answers are what they were; and the messages that hold them hold them
// under the same numbers.
func TestSharedMessages(t *testing.T) {
	type field struct {
		number protoreflect.FieldNumber
		name   protoreflect.Name
		kind   protoreflect.Kind
		enum   protoreflect.FullName
	}
	for _, tt := range []struct {
		msg  proto.Message
		want []field
	}{
		{&measurev1.NetworkAddress{}, []field{{1, "network", protoreflect.EnumKind, "meshperf.measure.v1.Network"},
			{2, "ip", protoreflect.StringKind, ""}, {3, "mtu_bytes", protoreflect.Uint32Kind, ""}}},
		{&measurev1.ToolInfo{}, []field{{1, "tool", protoreflect.EnumKind, "meshperf.measure.v1.Tool"},
			{2, "version", protoreflect.StringKind, ""}, {3, "error", protoreflect.StringKind, ""}}},
		{&measurev1.ExternalTarget{}, []field{{1, "name", protoreflect.StringKind, ""}, {2, "address", protoreflect.StringKind, ""},
			{3, "http_url", protoreflect.StringKind, ""}, {4, "iperf3_port", protoreflect.Uint32Kind, ""},
			{5, "qperf_port", protoreflect.Uint32Kind, ""}, {6, "qperf_data_port", protoreflect.Uint32Kind, ""}}},
	} {
		d := tt.msg.ProtoReflect().Descriptor()
		var got []field
		for i := range d.Fields().Len() {
			f := d.Fields().Get(i)
			var enum protoreflect.FullName
			if f.Enum() != nil {
				enum = f.Enum().FullName()
			}
			got = append(got, field{f.Number(), f.Name(), f.Kind(), enum})
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s fields %v, want %v", d.FullName(), got, tt.want)
		}
	}
	// The holders: each field's type is the shared one, repeated or not.
	for _, tt := range []struct {
		msg      proto.Message
		number   protoreflect.FieldNumber
		want     protoreflect.FullName
		repeated bool
	}{
		{&agentv1.Register{}, 4, "meshperf.measure.v1.NetworkAddress", true},
		{&agentv1.Register{}, 6, "meshperf.measure.v1.ToolInfo", true},
		{&agentv1.NodeEndpoint{}, 2, "meshperf.measure.v1.NetworkAddress", true},
		{&storev1.Agent{}, 4, "meshperf.measure.v1.NetworkAddress", true},
		{&storev1.Agent{}, 6, "meshperf.measure.v1.ToolInfo", true},
		{&meshv1.Agent{}, 4, "meshperf.measure.v1.NetworkAddress", true},
		{&meshv1.Agent{}, 6, "meshperf.measure.v1.ToolInfo", true},
		{&agentv1.Endpoints{}, 2, "meshperf.measure.v1.ExternalTarget", true},
		{&meshv1.ListExternalTargetsResponse{}, 1, "meshperf.measure.v1.ExternalTarget", true},
		{&agentv1.ProbeSettings{}, 4, "meshperf.measure.v1.ProbeKind", true},
		{&agentv1.ProbeSummary{}, 4, "meshperf.measure.v1.ProbeKind", false},
		{&meshv1.ListProbeSeriesRequest{}, 4, "meshperf.measure.v1.ProbeKind", false},
		{&agentv1.GossipMember{}, 2, "meshperf.measure.v1.GossipState", false},
		{&meshv1.Agent{}, 11, "meshperf.measure.v1.GossipState", false},
	} {
		f := tt.msg.ProtoReflect().Descriptor().Fields().ByNumber(tt.number)
		if f == nil || typeName(f) != tt.want || f.IsList() != tt.repeated {
			t.Errorf("%s field %d is %v, want %s (repeated: %t)", tt.msg.ProtoReflect().Descriptor().FullName(), tt.number, f, tt.want, tt.repeated)
		}
	}
}

// TestSharedEnums pins the values of the enums that the wire protocol,
// the API and the store share (measure.v1): their numbers are on the wire
// and in stored series keys, their names in the API's JSON.
func TestSharedEnums(t *testing.T) {
	for _, tt := range []struct {
		enum protoreflect.EnumDescriptor
		want []string
	}{
		{measurev1.GossipState(0).Descriptor(), []string{"GOSSIP_STATE_UNSPECIFIED", "GOSSIP_STATE_ALIVE", "GOSSIP_STATE_SUSPECT",
			"GOSSIP_STATE_DEAD", "GOSSIP_STATE_LEFT", "GOSSIP_STATE_FORGOTTEN"}},
		{measurev1.ProbeKind(0).Descriptor(), []string{"PROBE_KIND_UNSPECIFIED", "PROBE_KIND_ICMP", "PROBE_KIND_ICMP_MTU",
			"PROBE_KIND_TCP", "PROBE_KIND_HTTP"}},
	} {
		var got []string
		for i := range tt.enum.Values().Len() {
			v := tt.enum.Values().Get(i)
			if int(v.Number()) != i {
				t.Errorf("%s: %s has number %d, want %d", tt.enum.FullName(), v.Name(), v.Number(), i)
			}
			got = append(got, string(v.Name()))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s values %v, want %v", tt.enum.FullName(), got, tt.want)
		}
	}
}

// typeName is the full name of a field's message or enum type; empty for
// a scalar.
func typeName(f protoreflect.FieldDescriptor) protoreflect.FullName {
	switch {
	case f.Message() != nil:
		return f.Message().FullName()
	case f.Enum() != nil:
		return f.Enum().FullName()
	}
	return ""
}

// TestAgentRecordIsAPIAgent: the record's fields are the API Agent's of
// the same number, name and kind (the stored bytes of older coordinators
// were API Agents); the API's other fields are the derived ones, reserved
// in the record.
func TestAgentRecordIsAPIAgent(t *testing.T) {
	rec, api := (&storev1.Agent{}).ProtoReflect().Descriptor(), (&meshv1.Agent{}).ProtoReflect().Descriptor()
	for i := range rec.Fields().Len() {
		rf := rec.Fields().Get(i)
		af := api.Fields().ByNumber(rf.Number())
		if af == nil || af.Name() != rf.Name() || af.Kind() != rf.Kind() || af.Cardinality() != rf.Cardinality() {
			t.Errorf("record field %d %s: API Agent has %v", rf.Number(), rf.Name(), af)
		}
	}
	for i := range api.Fields().Len() {
		af := api.Fields().Get(i)
		if rec.Fields().ByNumber(af.Number()) == nil && !rec.ReservedRanges().Has(af.Number()) {
			t.Errorf("API Agent field %d %s is neither in the record nor reserved there", af.Number(), af.Name())
		}
	}
}

// TestAddressesAndTools: registrations become records field by field, and
// the record's addresses go back to the wire unchanged.
func TestAddressesAndTools(t *testing.T) {
	for _, tt := range []struct {
		name  string
		addrs []*measurev1.NetworkAddress
		tools []*measurev1.ToolInfo
		want  *storev1.Agent
	}{
		{"none", nil, nil, &storev1.Agent{}},
		{"empty slices stay nil", []*measurev1.NetworkAddress{}, []*measurev1.ToolInfo{}, &storev1.Agent{}},
		{"every field",
			[]*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "10.0.0.1", MtuBytes: 1500},
				{Network: measurev1.Network_NETWORK_POD, Ip: "fd00::2", MtuBytes: 1450}},
			[]*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_PING, Version: "ping 2024"}, {Tool: measurev1.Tool_TOOL_QPERF, Error: "not found in PATH"}},
			&storev1.Agent{
				Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "10.0.0.1", MtuBytes: 1500},
					{Network: measurev1.Network_NETWORK_POD, Ip: "fd00::2", MtuBytes: 1450}},
				Tools: []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_PING, Version: "ping 2024"}, {Tool: measurev1.Tool_TOOL_QPERF, Error: "not found in PATH"}},
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := &storev1.Agent{Addresses: Clones(tt.addrs), Tools: Clones(tt.tools)}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			for i, a := range got.GetAddresses() {
				if a == tt.addrs[i] {
					t.Errorf("address %d shared with the registration", i)
				}
			}
		})
	}
}

// TestAPIAgent: the API answer carries every stored field of the record
// and shares no message with it.
func TestAPIAgent(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 2, 9, 0, 0, 5, time.UTC))
	for _, tt := range []struct {
		name string
		rec  *storev1.Agent
		want *meshv1.Agent
	}{
		{"nil record", nil, &meshv1.Agent{}},
		{"every stored field",
			&storev1.Agent{NodeName: "node-1", Connected: true, AgentVersion: "v1",
				Addresses:   []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "10.0.0.1", MtuBytes: 1500}},
				ServiceIp:   "10.96.0.1",
				Tools:       []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_IPERF3, Version: "iperf 3.16", Error: "x"}},
				ConnectTime: at, LastSeenTime: at, Maintenance: true, ProbePort: 7947, HttpPort: 7948, ServiceIpv6: "fd00::1",
				Iperf3Port: 6201, QperfPort: 6202, QperfDataPort: 6203},
			&meshv1.Agent{NodeName: "node-1", Connected: true, AgentVersion: "v1",
				Addresses:   []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: "10.0.0.1", MtuBytes: 1500}},
				ServiceIp:   "10.96.0.1",
				Tools:       []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_IPERF3, Version: "iperf 3.16", Error: "x"}},
				ConnectTime: at, LastSeenTime: at, Maintenance: true, ProbePort: 7947, HttpPort: 7948, ServiceIpv6: "fd00::1",
				Iperf3Port: 6201, QperfPort: 6202, QperfDataPort: 6203}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := APIAgent(tt.rec)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("APIAgent (-want +got):\n%s", diff)
			}
			if tt.rec != nil && got.GetConnectTime() == tt.rec.GetConnectTime() {
				t.Error("APIAgent shares connect_time with the record")
			}
		})
	}
}

// TestClonesExternalTargets: the allowlist reaches the API whole, in
// copies of its own.
func TestClonesExternalTargets(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []*measurev1.ExternalTarget
		want []*measurev1.ExternalTarget
	}{
		{"none", nil, nil},
		{"every field", []*measurev1.ExternalTarget{
			{Name: "lb", Address: "203.0.113.7", HttpUrl: "http://203.0.113.7/", Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766},
			{Name: "dns", Address: "example.test"}},
			[]*measurev1.ExternalTarget{
				{Name: "lb", Address: "203.0.113.7", HttpUrl: "http://203.0.113.7/", Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766},
				{Name: "dns", Address: "example.test"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Clones(tt.in)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Clones (-want +got):\n%s", diff)
			}
			for i := range got {
				if got[i] == tt.in[i] {
					t.Errorf("target %d shared with the allowlist", i)
				}
			}
		})
	}
}
