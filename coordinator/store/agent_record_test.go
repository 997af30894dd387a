package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// goldenAgentFile holds the bytes of one agent as coordinators before
// meshperf.store.v1 stored it: a meshv1.Agent of commit 23fcd19 (whose
// addresses and tools were agent.v1 messages) with every field set,
// encoded by that commit's generated code with deterministic marshaling.
// It is a frozen capture, never rewritten: an -update from today's types
// would test nothing.
const goldenAgentFile = "testdata/agent_meshv1.golden"

// goldenRecord is what the golden bytes hold, as the store record: every
// field the old coordinator persisted.
func goldenRecord() *storev1.Agent {
	return &storev1.Agent{
		NodeName: "node-1", Connected: true, AgentVersion: "v0.14.2",
		Addresses: []*measurev1.NetworkAddress{
			{Network: measurev1.Network_NETWORK_HOST, Ip: "172.18.0.11", MtuBytes: 1500},
			{Network: measurev1.Network_NETWORK_POD, Ip: "fd00:10:244:1::2", MtuBytes: 1450},
		},
		ServiceIp: "10.96.0.21",
		Tools: []*measurev1.ToolInfo{
			{Tool: measurev1.Tool_TOOL_PING, Version: "ping from iputils 20240117"},
			{Tool: measurev1.Tool_TOOL_QPERF, Error: "not found in PATH"},
		},
		ConnectTime:  timestamppb.New(time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)),
		LastSeenTime: timestamppb.New(time.Date(2026, 11, 30, 13, 30, 15, 0, time.UTC)),
		Maintenance:  true,
		ProbePort:    7947, HttpPort: 7948, ServiceIpv6: "fd00:96::21",
	}
}

// TestAgentRecordReadsOldBytes: the bytes an older coordinator stored as a
// meshv1.Agent decode into the store record with every persisted field
// intact, and the fields it derived when answering (state, gossip,
// partition: reserved in the record) are kept aside as unknown fields,
// not misread as another field.
func TestAgentRecordReadsOldBytes(t *testing.T) {
	b, err := os.ReadFile(goldenAgentFile)
	if err != nil {
		t.Fatal(err)
	}
	got := &storev1.Agent{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatalf("decode %s: %v", goldenAgentFile, err)
	}
	if diff := cmp.Diff(goldenRecord(), got, protocmp.Transform(), protocmp.IgnoreUnknown()); diff != "" {
		t.Errorf("record from old bytes (-want +got):\n%s", diff)
	}
	// The derived fields are unknown to the record: 9 (state), 11..14.
	unknown := map[protowire.Number]bool{}
	for u := []byte(got.ProtoReflect().GetUnknown()); len(u) > 0; {
		num, _, n := protowire.ConsumeField(u)
		if n < 0 {
			t.Fatalf("unknown fields: %v", protowire.ParseError(n))
		}
		unknown[num] = true
		u = u[n:]
	}
	for _, num := range []protowire.Number{9, 11, 12, 13, 14} {
		if !unknown[num] {
			t.Errorf("derived field %d of the old bytes is not among the record's unknown fields %v", num, unknown)
		}
	}
	if len(unknown) != 5 {
		t.Errorf("unknown fields %v, want exactly 9, 11..14 (a persisted field has no home in the record)", unknown)
	}
}

// TestAgentRecordWireTwin: the record and today's API Agent agree on the
// wire for every record field, both ways: a record read back by an older
// coordinator (a downgrade) is the agent it wrote.
func TestAgentRecordWireTwin(t *testing.T) {
	rec := goldenRecord()
	b, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	api := &meshv1.Agent{}
	if err := proto.Unmarshal(b, api); err != nil {
		t.Fatal(err)
	}
	back := &storev1.Agent{}
	if err := proto.Unmarshal(mustMarshal(t, api), back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, back, protocmp.Transform()); diff != "" {
		t.Errorf("record -> meshv1.Agent -> record (-want +got):\n%s", diff)
	}
	if api.GetNodeName() != rec.GetNodeName() || len(api.GetAddresses()) != 2 || api.GetAddresses()[1].GetMtuBytes() != 1450 ||
		api.GetTools()[1].GetError() != "not found in PATH" || !api.GetMaintenance() || api.GetServiceIpv6() != rec.GetServiceIpv6() {
		t.Errorf("record read as meshv1.Agent = %v, want the record's fields", api)
	}
}

// TestAgentsReadsAnOldStore: a store file whose agents bucket holds the
// old bytes opens, and Agents returns the record.
func TestAgentsReadsAnOldStore(t *testing.T) {
	b, err := os.ReadFile(goldenAgentFile)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "meshperf.db")
	s, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketAgents).Put([]byte("node-1"), b) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := testnet.Ctx(t, 10*time.Second)
	got, err := s.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Agents() = %d agents, want 1", len(got))
	}
	if diff := cmp.Diff(goldenRecord(), got[0], protocmp.Transform(), protocmp.IgnoreUnknown()); diff != "" {
		t.Errorf("Agents()[0] from an old store (-want +got):\n%s", diff)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
