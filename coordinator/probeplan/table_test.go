package probeplan

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

func TestUpsertValidation(t *testing.T) {
	ok := testPeer("a", 0)
	tests := []struct {
		name string
		edit func(*Peer)
		want string // "" for valid; else in the error
	}{
		{"valid", func(*Peer) {}, ""},
		{"no pod", func(p *Peer) { p.PodIP, p.PodMTU = netip.Addr{}, 0 }, ""},
		{"ipv6", func(p *Peer) { p.HostIP = netip.MustParseAddr("fd00::1") }, ""},
		{"mtu bounds", func(p *Peer) { p.HostMTU, p.PodMTU = 576, 65535 }, ""},
		{"http 65535", func(p *Peer) { p.HTTPPort = 65535 }, ""},
		{"empty name", func(p *Peer) { p.Name = "" }, `node_name: node name ""`},
		{"upper name", func(p *Peer) { p.Name = "Node-A" }, `"Node-A"`},
		{"no host ip", func(p *Peer) { p.HostIP = netip.Addr{} }, "host_ip"},
		{"unspecified host", func(p *Peer) { p.HostIP = netip.MustParseAddr("0.0.0.0") }, "host_ip 0.0.0.0"},
		{"multicast pod", func(p *Peer) { p.PodIP = netip.MustParseAddr("224.0.0.1") }, "pod_ip 224.0.0.1"},
		{"mapped service", func(p *Peer) { p.ServiceIP = netip.MustParseAddr("::ffff:10.0.0.1") }, "service_ip ::ffff:10.0.0.1"},
		{"zoned host", func(p *Peer) { p.HostIP = netip.MustParseAddr("fe80::1%eth0") }, "host_ip fe80::1%eth0"},
		{"broadcast", func(p *Peer) { p.HostIP = netip.MustParseAddr("255.255.255.255") }, "host_ip 255.255.255.255"},
		{"probe port 0", func(p *Peer) { p.ProbePort = 0 }, "probe_port 0"},
		{"probe port big", func(p *Peer) { p.ProbePort = 65536 }, "probe_port 65536"},
		{"http port big", func(p *Peer) { p.HTTPPort = 70000 }, "http_port 70000"},
		{"host mtu small", func(p *Peer) { p.HostMTU = 575 }, "host_mtu_bytes 575"},
		{"pod mtu big", func(p *Peer) { p.PodMTU = 65536 }, "pod_mtu_bytes 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable(Options{FirstRevision: 1})
			p := ok
			tt.edit(&p)
			rev, changed, err := tb.Upsert(p)
			if tt.want == "" {
				if err != nil || !changed || rev != 2 {
					t.Fatalf("Upsert = %d, %v, %v; want 2, true, nil", rev, changed, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Upsert error %v; want ErrInvalid naming %q", err, tt.want)
			}
			if changed || rev != 1 || tb.Len() != 0 {
				t.Errorf("refused Upsert changed the table: rev %d, changed %v, len %d", rev, changed, tb.Len())
			}
		})
	}
}

func TestRevisions(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 10})
	steps := []struct {
		name    string
		do      func() (uint64, bool)
		wantRev uint64
		wantOK  bool
	}{
		{"add a", func() (uint64, bool) { r, c, _ := tb.Upsert(testPeer("a", 1)); return r, c }, 11, true},
		{"same a", func() (uint64, bool) { r, c, _ := tb.Upsert(testPeer("a", 1)); return r, c }, 11, false},
		{"change a", func() (uint64, bool) { r, c, _ := tb.Upsert(testPeer("a", 2)); return r, c }, 12, true},
		{"remove absent", func() (uint64, bool) { return tb.Remove("b") }, 12, false},
		{"remove a", func() (uint64, bool) { return tb.Remove("a") }, 13, true},
		{"remove a again", func() (uint64, bool) { return tb.Remove("a") }, 13, false},
		{"settings off (already)", func() (uint64, bool) { return tb.SetSettings(nil), false }, 13, false},
		{"settings on", func() (uint64, bool) { return tb.SetSettings(testSettings(1)), true }, 14, true},
		{"same settings", func() (uint64, bool) { return tb.SetSettings(testSettings(1)), false }, 14, false},
		{"settings off", func() (uint64, bool) { return tb.SetSettings(nil), true }, 15, true},
	}
	for _, s := range steps {
		rev, ok := s.do()
		if rev != s.wantRev || ok != s.wantOK || tb.Revision() != s.wantRev {
			t.Fatalf("%s: %d, %v (Revision %d); want %d, %v", s.name, rev, ok, tb.Revision(), s.wantRev, s.wantOK)
		}
	}
}

func names(ps []*agentv1.ProbePeer) []string {
	var n []string
	for _, p := range ps {
		n = append(n, p.GetNodeName())
	}
	slices.Sort(n)
	return n
}

func TestDelta(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 100})
	for _, n := range []string{"a", "b", "c"} {
		put(t, tb, testPeer(n, 1))
	}
	tb.SetSettings(testSettings(1)) // 104
	put(t, tb, testPeer("d", 1))    // 105
	put(t, tb, testPeer("a", 2))    // 106
	tb.Remove("b")                  // 107
	put(t, tb, testPeer("e", 1))    // 108
	tb.Remove("e")                  // 109: added and removed after 104

	tests := []struct {
		name       string
		node       string
		since      uint64
		wantNil    bool
		wantFull   bool
		wantBase   uint64
		wantUpsert []string
		wantRemove []string
		wantSet    bool
	}{
		{name: "full", node: "a", since: 0, wantFull: true, wantUpsert: []string{"c", "d"}, wantSet: true},
		{name: "up to date", node: "a", since: 109, wantNil: true},
		{name: "from 104", node: "c", since: 104, wantBase: 104, wantUpsert: []string{"a", "d"}, wantRemove: []string{"b"}},
		{name: "from 103", node: "c", since: 103, wantBase: 103, wantUpsert: []string{"a", "d"}, wantRemove: []string{"b"}, wantSet: true},
		{name: "own change only", node: "e", since: 108, wantNil: true},
		{name: "own removal only", node: "b", since: 107, wantNil: true},
		{name: "own change skipped", node: "a", since: 105, wantBase: 105, wantRemove: []string{"b"}},
		{name: "previous run", node: "a", since: 50, wantFull: true, wantUpsert: []string{"c", "d"}, wantSet: true},
		{name: "future", node: "a", since: 200, wantFull: true, wantUpsert: []string{"c", "d"}, wantSet: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, full := tb.Delta(tt.node, tt.since)
			if tt.wantNil {
				if plan != nil || full {
					t.Fatalf("Delta = %v, %v; want nil", plan, full)
				}
				return
			}
			if plan == nil || full != tt.wantFull || plan.GetBaseVersion() != tt.wantBase || plan.GetVersion() != 109 {
				t.Fatalf("Delta = %v, full %v; want base %d, version 109, full %v", plan, full, tt.wantBase, tt.wantFull)
			}
			if got := names(plan.GetUpsert()); !slices.Equal(got, tt.wantUpsert) {
				t.Errorf("upsert %v; want %v", got, tt.wantUpsert)
			}
			if got := slices.Sorted(slices.Values(plan.GetRemove())); !slices.Equal(got, tt.wantRemove) {
				t.Errorf("remove %v; want %v", got, tt.wantRemove)
			}
			if (plan.GetSettings() != nil) != tt.wantSet {
				t.Errorf("settings %v; want present %v", plan.GetSettings(), tt.wantSet)
			}
		})
	}
}

func TestSettingsOffIsFull(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	tb.SetSettings(testSettings(1))
	put(t, tb, testPeer("a", 1))
	held := tb.Revision()
	tb.SetSettings(nil)
	plan, full := tb.Delta("b", held)
	if !full || plan.GetSettings() != nil || len(plan.GetUpsert()) != 1 {
		t.Fatalf("after probing off: %v, full %v; want a full plan without settings", plan, full)
	}
	// Later deltas from the full plan's version need no settings.
	put(t, tb, testPeer("c", 1))
	if plan, full := tb.Delta("b", plan.GetVersion()); full || plan.GetSettings() != nil || len(plan.GetUpsert()) != 1 {
		t.Fatalf("delta after probing off: %v, full %v", plan, full)
	}
}

func TestRemovalAfterCompaction(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	for i := range 200 {
		put(t, tb, testPeer(nodeName(i), i))
	}
	behind := tb.Revision()
	tb.Remove(nodeName(7))
	justAfter := tb.Revision()
	// Remove many others: compaction keeps only the newest tombstones.
	for i := 8; i < 200; i++ {
		tb.Remove(nodeName(i))
	}
	tb.mu.RLock()
	_, kept := tb.names[nodeName(7)]
	tombs, records := tb.tombs, len(tb.log)
	tb.mu.RUnlock()
	if kept || records > 2*tb.live+compactSlack {
		t.Fatalf("after 193 removals of 200 peers: %d tombstones, %d records, oldest kept %v", tombs, records, kept)
	}
	plan, full := tb.Delta(nodeName(1), behind)
	if !full || slices.Contains(names(plan.GetUpsert()), nodeName(7)) {
		t.Fatalf("session behind a compacted removal got full %v with %d peers; want a full plan without %s", full, len(plan.GetUpsert()), nodeName(7))
	}
	if plan, full := tb.Delta(nodeName(1), justAfter); full && justAfter < tb.compacted {
		t.Logf("session just after the removal also gets a full plan (%d peers)", len(plan.GetUpsert()))
	}
}

func TestRemovalBeforeCompactionReachesLaggard(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	for i := range 10 {
		put(t, tb, testPeer(nodeName(i), i))
	}
	held := &replica{}
	plan, _ := tb.Delta(nodeName(0), 0)
	if err := Apply(held, plan); err != nil {
		t.Fatal(err)
	}
	tb.Remove(nodeName(3))
	for i := range 30 { // supersede records so compaction has work, tombstone kept
		put(t, tb, testPeer(nodeName(1+i%2), 100+i))
	}
	tb.mu.Lock()
	tb.compact(10)
	tb.mu.Unlock()
	plan, full := tb.Delta(nodeName(0), held.version)
	if full || !slices.Equal(plan.GetRemove(), []string{nodeName(3)}) {
		t.Fatalf("laggard got %v, full %v; want a delta removing %s", plan, full, nodeName(3))
	}
	if err := Apply(held, plan); err != nil {
		t.Fatal(err)
	}
	if err := sameAsFull(tb, nodeName(0), held); err != nil {
		t.Fatal(err)
	}
}

func nodeName(i int) string {
	return "node-" + string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + "-" + itoa(i)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestSharedMessagesAreNotCopiedOrMutated(t *testing.T) {
	tb := NewTable(Options{FirstRevision: 1})
	s := testSettings(1)
	tb.SetSettings(s)
	s.PayloadBytes = 9999 // the caller's copy is not the table's
	put(t, tb, testPeer("a", 1))
	p1, _ := tb.Delta("b", 0)
	p2, _ := tb.Delta("c", 0)
	if p1.GetUpsert()[0] != p2.GetUpsert()[0] {
		t.Error("full plans do not share the peer message")
	}
	if p1.GetSettings().GetPayloadBytes() == 9999 || !proto.Equal(p1.GetSettings(), testSettings(1)) {
		t.Errorf("settings %v; want a clone of what was set", p1.GetSettings())
	}
}

// TestWorstCasePeerSize backs the package's size bound: 5,000 maximal
// peers fit gRPC's default 4 MB message.
func TestWorstCasePeerSize(t *testing.T) {
	p := Peer{
		Name:   strings.Repeat("a", 253),
		HostIP: netip.MustParseAddr("fd00:1111:2222:3333:4444:5555:6666:7777"), PodIP: netip.MustParseAddr("fd01:1111:2222:3333:4444:5555:6666:7777"),
		ServiceIP: netip.MustParseAddr("fd02:1111:2222:3333:4444:5555:6666:7777"),
		ProbePort: 65535, HTTPPort: 65535, HostMTU: 65535, PodMTU: 65535,
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	one := proto.Size(&agentv1.ProbePlan{Upsert: []*agentv1.ProbePeer{p.Proto()}})
	if one > 430 || 5000*one > 4<<20 {
		t.Errorf("a maximal peer takes %d bytes in a plan; 5,000 take %d (limit 4 MiB)", one, 5000*one)
	}
	t.Logf("maximal peer: %d bytes; 5,000: %d bytes", one, 5000*one)
}

// put upserts p into tb and fails the test on an error: the tests' peers
// are valid.
func put(t testing.TB, tb *Table, p Peer) {
	t.Helper()
	if _, _, err := tb.Upsert(p); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}
