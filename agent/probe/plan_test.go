package probe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestMain fails the package if a goroutine outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testSettings is a valid settings message.
func testSettings() *agentv1.ProbeSettings {
	return &agentv1.ProbeSettings{
		Interval:            durationpb.New(time.Second),
		ReportInterval:      durationpb.New(2 * time.Second),
		Timeout:             durationpb.New(500 * time.Millisecond),
		Kinds:               []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_ICMP, measurev1.ProbeKind_PROBE_KIND_TCP},
		Paths:               []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		PayloadBytes:        56,
		MaxInFlight:         64,
		MaxPacketsPerSecond: 1000,
	}
}

func testPeer(name, ip string) *agentv1.ProbePeer {
	return &agentv1.ProbePeer{NodeName: name, HostIp: ip, ProbePort: 7000, HttpPort: 7001}
}

func newTestProber(t testing.TB, loopback bool) *Prober {
	t.Helper()
	p, err := New(Config{Node: "self", Host: Network{Net: measurev1.Network_NETWORK_HOST}, Report: func(*agentv1.ProbeReport) {}, AllowLoopback: loopback})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApply: full plans replace, deltas apply to exactly the held
// version, every refusal names its field and keeps the held plan.
func TestApply(t *testing.T) {
	full := &agentv1.ProbePlan{Version: 5, Settings: testSettings(), Upsert: []*agentv1.ProbePeer{testPeer("a", "10.0.0.1"), testPeer("b", "10.0.0.2")}}
	mod := func(f func(*agentv1.ProbePlan)) *agentv1.ProbePlan {
		c := proto.Clone(full).(*agentv1.ProbePlan)
		f(c)
		return c
	}
	set := func(f func(*agentv1.ProbeSettings)) *agentv1.ProbePlan {
		return mod(func(p *agentv1.ProbePlan) { f(p.Settings) })
	}
	peer := func(f func(*agentv1.ProbePeer)) *agentv1.ProbePlan {
		return mod(func(p *agentv1.ProbePlan) { f(p.Upsert[0]) })
	}
	delta := func(base, v uint64, up []*agentv1.ProbePeer, rm ...string) *agentv1.ProbePlan {
		return &agentv1.ProbePlan{Version: v, BaseVersion: base, Upsert: up, Remove: rm}
	}
	tests := []struct {
		name      string
		plan      *agentv1.ProbePlan
		wantErr   string // "" = accepted
		wantBase  bool   // error wraps ErrBaseVersion
		wantPeers []string
	}{
		{name: "full", plan: full, wantPeers: []string{"a", "b"}},
		{name: "full without settings", plan: mod(func(p *agentv1.ProbePlan) { p.Settings = nil }), wantPeers: []string{"a", "b"}},
		{name: "delta upsert", plan: delta(5, 6, []*agentv1.ProbePeer{testPeer("c", "10.0.0.3")}), wantPeers: []string{"a", "b", "c"}},
		{name: "delta remove", plan: delta(5, 6, nil, "a"), wantPeers: []string{"b"}},
		{name: "delta wrong base", plan: delta(4, 6, nil, "a"), wantErr: "base_version 4, held 5", wantBase: true},
		{name: "delta not growing", plan: delta(5, 5, nil), wantErr: "does not grow"},
		{name: "delta removes unknown: no-op", plan: delta(5, 6, nil, "zz"), wantPeers: []string{"a", "b"}},
		{name: "delta removes bad name", plan: delta(5, 6, nil, "Z_z"), wantErr: `remove[0]: node name "Z_z"`},
		{name: "delta removes and upserts", plan: delta(5, 6, []*agentv1.ProbePeer{testPeer("a", "10.0.0.9")}, "a"), wantErr: "also upserted"},
		{name: "version 0", plan: mod(func(p *agentv1.ProbePlan) { p.Version = 0 }), wantErr: "version 0"},
		{name: "full with remove", plan: mod(func(p *agentv1.ProbePlan) { p.Remove = []string{"a"} }), wantErr: "full plan has remove"},
		{name: "nil plan", plan: nil, wantErr: "plan is nil"},
		{name: "interval short", plan: set(func(s *agentv1.ProbeSettings) { s.Interval = durationpb.New(999 * time.Millisecond) }), wantErr: "settings.interval 999ms"},
		{name: "interval unset", plan: set(func(s *agentv1.ProbeSettings) { s.Interval = nil }), wantErr: "settings.interval is not set"},
		{name: "interval invalid", plan: set(func(s *agentv1.ProbeSettings) { s.Interval = &durationpb.Duration{Seconds: 1, Nanos: -1} }), wantErr: "settings.interval"},
		{name: "report not multiple", plan: set(func(s *agentv1.ProbeSettings) { s.ReportInterval = durationpb.New(1500 * time.Millisecond) }), wantErr: "not a whole multiple"},
		{name: "report under interval", plan: set(func(s *agentv1.ProbeSettings) { s.ReportInterval = durationpb.New(time.Second / 2) }), wantErr: "settings.report_interval 500ms"},
		{name: "timeout = interval", plan: set(func(s *agentv1.ProbeSettings) { s.Timeout = durationpb.New(time.Second) }), wantErr: "settings.timeout 1s"},
		{name: "timeout unset", plan: set(func(s *agentv1.ProbeSettings) { s.Timeout = nil }), wantErr: "settings.timeout is not set"},
		{name: "no kinds", plan: set(func(s *agentv1.ProbeSettings) { s.Kinds = nil }), wantErr: "settings.kinds is empty"},
		{name: "unknown kind", plan: set(func(s *agentv1.ProbeSettings) { s.Kinds = []measurev1.ProbeKind{9} }), wantErr: "settings.kinds[0] 9"},
		{name: "duplicate kind", plan: set(func(s *agentv1.ProbeSettings) { s.Kinds = append(s.Kinds, s.Kinds[0]) }), wantErr: "settings.kinds[2] PROBE_KIND_ICMP is listed twice"},
		{name: "external path", plan: set(func(s *agentv1.ProbeSettings) { s.Paths = []measurev1.Path{measurev1.Path_PATH_HOST_TO_EXTERNAL} }), wantErr: "settings.paths[0] PATH_HOST_TO_EXTERNAL"},
		{name: "no paths", plan: set(func(s *agentv1.ProbeSettings) { s.Paths = nil }), wantErr: "settings.paths is empty"},
		{name: "duplicate path", plan: set(func(s *agentv1.ProbeSettings) { s.Paths = append(s.Paths, s.Paths[0]) }), wantErr: "is listed twice"},
		{name: "payload", plan: set(func(s *agentv1.ProbeSettings) { s.PayloadBytes = 65001 }), wantErr: "settings.payload_bytes 65001"},
		{name: "in flight 0", plan: set(func(s *agentv1.ProbeSettings) { s.MaxInFlight = 0 }), wantErr: "settings.max_in_flight 0"},
		{name: "in flight huge", plan: set(func(s *agentv1.ProbeSettings) { s.MaxInFlight = 1 << 20 }), wantErr: "settings.max_in_flight 1048576"},
		{name: "pps 0", plan: set(func(s *agentv1.ProbeSettings) { s.MaxPacketsPerSecond = 0 }), wantErr: "settings.max_packets_per_second 0"},
		{name: "subset without rotation", plan: set(func(s *agentv1.ProbeSettings) { s.SubsetSize = 3 }), wantErr: "settings.subset_rotation is not set"},
		{name: "rotation without subset", plan: set(func(s *agentv1.ProbeSettings) { s.SubsetRotation = durationpb.New(time.Minute) }), wantErr: "without subset_size"},
		{name: "subset", plan: set(func(s *agentv1.ProbeSettings) { s.SubsetSize = 1; s.SubsetRotation = durationpb.New(time.Minute) }), wantPeers: []string{"a", "b"}},
		{name: "bad node name", plan: peer(func(p *agentv1.ProbePeer) { p.NodeName = "A_b" }), wantErr: `upsert[0]: node_name: node name "A_b"`},
		{name: "self", plan: peer(func(p *agentv1.ProbePeer) { p.NodeName = "self" }), wantErr: `"self" is this agent's own node`},
		{name: "duplicate peer", plan: peer(func(p *agentv1.ProbePeer) { p.NodeName = "b" }), wantErr: `upsert[1]: node "b" is upserted twice`},
		{name: "host ip missing", plan: peer(func(p *agentv1.ProbePeer) { p.HostIp = "" }), wantErr: `peer "a": host_ip: is empty`},
		{name: "host ip junk", plan: peer(func(p *agentv1.ProbePeer) { p.HostIp = "10.0.0" }), wantErr: `host_ip: "10.0.0" is not an IP`},
		{name: "loopback refused", plan: peer(func(p *agentv1.ProbePeer) { p.HostIp = "127.0.0.2" }), wantErr: `host_ip: "127.0.0.2" is a loopback`},
		{name: "link-local", plan: peer(func(p *agentv1.ProbePeer) { p.PodIp = "169.254.1.1" }), wantErr: `pod_ip: "169.254.1.1" is link-local`},
		{name: "link-local v6", plan: peer(func(p *agentv1.ProbePeer) { p.ServiceIp = "fe80::1" }), wantErr: `service_ip: "fe80::1" is link-local`},
		{name: "multicast", plan: peer(func(p *agentv1.ProbePeer) { p.HostIp = "224.0.0.1" }), wantErr: "multicast"},
		{name: "unspecified", plan: peer(func(p *agentv1.ProbePeer) { p.HostIp = "0.0.0.0" }), wantErr: "unspecified"},
		{name: "port", plan: peer(func(p *agentv1.ProbePeer) { p.ProbePort = 70000 }), wantErr: "probe_port: 70000"},
		{name: "http port", plan: peer(func(p *agentv1.ProbePeer) { p.HttpPort = 65536 }), wantErr: "http_port: 65536"},
		{name: "mtu small", plan: peer(func(p *agentv1.ProbePeer) { p.HostMtuBytes = 575 }), wantErr: "host_mtu_bytes: 575"},
		{name: "mtu big", plan: peer(func(p *agentv1.ProbePeer) { p.PodMtuBytes = 65536 }), wantErr: "pod_mtu_bytes: 65536"},
		{name: "nil peer", plan: mod(func(p *agentv1.ProbePlan) { p.Upsert[1] = nil }), wantErr: "upsert[1]: peer is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProber(t, false)
			if _, err := p.Apply(full); err != nil {
				t.Fatal(err)
			}
			v, err := p.Apply(tt.plan)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if v != tt.plan.GetVersion() || p.Version() != v {
					t.Errorf("version %d (held %d), want %d", v, p.Version(), tt.plan.GetVersion())
				}
				if got := peerNames(p.held()); got != strings.Join(tt.wantPeers, ",") {
					t.Errorf("peers %s, want %v", got, tt.wantPeers)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Apply error %v, want one containing %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrBaseVersion) != tt.wantBase {
				t.Errorf("errors.Is(%v, ErrBaseVersion) = %v, want %v", err, !tt.wantBase, tt.wantBase)
			}
			if v != 5 || p.Version() != 5 || peerNames(p.held()) != "a,b" {
				t.Errorf("after a refusal: version %d, held %d, peers %s; want 5, 5, a,b", v, p.Version(), peerNames(p.held()))
			}
		})
	}
}

func peerNames(pl *plan) string {
	var names []string
	for n := range pl.peers {
		names = append(names, n)
	}
	sortStrings(names)
	return strings.Join(names, ",")
}

// TestApplyDeltaWithoutPlan: a delta to a Prober holding nothing is
// refused with ErrBaseVersion.
func TestApplyDeltaWithoutPlan(t *testing.T) {
	p := newTestProber(t, false)
	_, err := p.Apply(&agentv1.ProbePlan{Version: 2, BaseVersion: 1})
	if !errors.Is(err, ErrBaseVersion) {
		t.Fatalf("Apply: %v, want ErrBaseVersion", err)
	}
}

// TestApplyMaxPeers: a plan over protocol.ProbeMaxPeers is refused.
func TestApplyMaxPeers(t *testing.T) {
	p := newTestProber(t, false)
	pl := &agentv1.ProbePlan{Version: 1, Settings: testSettings()}
	for i := range protocol.ProbeMaxPeers + 1 {
		pl.Upsert = append(pl.Upsert, testPeer(fmt.Sprintf("n%d", i), fmt.Sprintf("10.%d.%d.1", i/256, i%256)))
	}
	if _, err := p.Apply(pl); err == nil || !strings.Contains(err.Error(), "more than 10000 peers") {
		t.Fatalf("Apply: %v, want more than 10000 peers", err)
	}
	pl.Upsert = pl.Upsert[:protocol.ProbeMaxPeers]
	if _, err := p.Apply(pl); err != nil {
		t.Fatalf("Apply of %d peers: %v", protocol.ProbeMaxPeers, err)
	}
}

// FuzzApply: whatever bytes arrive as a plan, Apply does not panic, and a
// refusal keeps the held plan.
func FuzzApply(f *testing.F) {
	good, _ := proto.Marshal(&agentv1.ProbePlan{Version: 2, Settings: testSettings(), Upsert: []*agentv1.ProbePeer{testPeer("a", "10.0.0.1")}})
	f.Add(good)
	delta, _ := proto.Marshal(&agentv1.ProbePlan{Version: 3, BaseVersion: 1, Remove: []string{"x"}})
	f.Add(delta)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var pl agentv1.ProbePlan
		if proto.Unmarshal(b, &pl) != nil {
			return
		}
		p := newTestProber(t, false)
		if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Upsert: []*agentv1.ProbePeer{testPeer("x", "10.0.0.1")}}); err != nil {
			t.Fatal(err)
		}
		v, err := p.Apply(&pl)
		if err != nil {
			if v != 1 || p.Version() != 1 || len(p.held().peers) != 1 {
				t.Fatalf("refused (%v) but held version %d, %d peers", err, p.Version(), len(p.held().peers))
			}
			return
		}
		held := p.held()
		for _, pe := range held.peers {
			if !pe.hostIP.IsValid() || pe.hostIP.IsLoopback() || pe.hostIP.IsLinkLocalUnicast() {
				t.Fatalf("accepted host ip %v", pe.hostIP)
			}
		}
		if s := held.settings; s != nil && (s.interval < protocol.ProbeMinInterval || s.timeout >= s.interval || s.reportInterval%s.interval != 0) {
			t.Fatalf("accepted settings %+v", s)
		}
		if len(held.peers) > protocol.ProbeMaxPeers {
			t.Fatalf("%d peers", len(held.peers))
		}
	})
}

func sortStrings(s []string) { slices.Sort(s) }

// TestMaintenancePeerNotProbed checks that a cordoned peer stays in the
// plan (a registered endpoint) but gets no probe.
func TestMaintenancePeerNotProbed(t *testing.T) {
	p := newTestProber(t, false)
	cordoned := testPeer("b", "10.0.0.2")
	cordoned.Maintenance = true
	if _, err := p.Apply(&agentv1.ProbePlan{Version: 1, Settings: testSettings(), Upsert: []*agentv1.ProbePeer{testPeer("a", "10.0.0.1"), cordoned}}); err != nil {
		t.Fatal(err)
	}
	if got := peerNames(p.held()); got != "a,b" {
		t.Fatalf("peers %s, want a,b: a cordoned peer stays in the plan", got)
	}
	ts := targets(p.cfg.Node, []*Network{&p.cfg.Host}, p.held())
	if len(ts) == 0 {
		t.Fatal("no probe of peer a")
	}
	for _, tg := range ts {
		if tg.key.peer == "b" {
			t.Errorf("the cordoned peer b is probed: %+v", tg)
		}
	}
}
