package testspec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestEnumNames pins every name table's words, as the tables, messages
// and goldens print them.
func TestEnumNames(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{StatusName(measurev1.Status_STATUS_PARSE_ERROR), "parse_error"},
		{StatusName(measurev1.Status_STATUS_OK), "ok"},
		{StatusName(measurev1.Status_STATUS_UNSPECIFIED), "unspecified"},
		{StatusName(measurev1.Status(99)), "99"},
		{RunStateName(measurev1.RunState_RUN_STATE_SUCCEEDED), "succeeded"},
		{RunStateName(measurev1.RunState_RUN_STATE_UNSPECIFIED), "unspecified"},
		{NodeStateName(meshv1.NodeState_NODE_STATE_MAINTENANCE), "maintenance"},
		{NodeStateName(meshv1.NodeState_NODE_STATE_UNSPECIFIED), "unspecified"},
		{GossipStateName(measurev1.GossipState_GOSSIP_STATE_DEAD), "dead"},
		{GossipStateName(measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED), "unspecified"},
		{GossipStateOrDash(measurev1.GossipState_GOSSIP_STATE_LEFT), "left"},
		{ProbeKindName(measurev1.ProbeKind_PROBE_KIND_ICMP_MTU), "icmp_mtu"},
		{ProbeKindName(measurev1.ProbeKind_PROBE_KIND_HTTP), "http"},
		{ProbeKindName(measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED), "unspecified"},
		{GossipStateOrDash(measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED), "-"},
		{ToolName(measurev1.Tool_TOOL_QPERF), "qperf"},
		{ToolName(measurev1.Tool_TOOL_IPERF3), "iperf3"},
		{ToolName(measurev1.Tool_TOOL_CURL), "HTTP"},
		{ToolName(measurev1.Tool_TOOL_AB), "HTTP"},
		{ToolName(measurev1.Tool_TOOL_PING), "TOOL_PING"},
		{ToolName(measurev1.Tool_TOOL_UNSPECIFIED), "TOOL_UNSPECIFIED"},
		{ToolProgram(measurev1.Tool_TOOL_PING), "ping"},
		{ToolProgram(measurev1.Tool_TOOL_QPERF), "qperf"},
		{ToolProgram(measurev1.Tool_TOOL_IPERF3), "iperf3"},
		{ToolProgram(measurev1.Tool_TOOL_CURL), "curl"},
		{ToolProgram(measurev1.Tool_TOOL_AB), "ab"},
		{ToolProgram(measurev1.Tool_TOOL_UNSPECIFIED), "tool"},
		{ToolProgram(measurev1.Tool(42)), "tool"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

// TestParseProbeKind pins the config file's probe kind names and what the
// parser refuses.
func TestParseProbeKind(t *testing.T) {
	tests := []struct {
		name   string
		want   measurev1.ProbeKind
		wantOK bool
	}{
		{"icmp", measurev1.ProbeKind_PROBE_KIND_ICMP, true},
		{"icmp_mtu", measurev1.ProbeKind_PROBE_KIND_ICMP_MTU, true},
		{"tcp", measurev1.ProbeKind_PROBE_KIND_TCP, true},
		{"http", measurev1.ProbeKind_PROBE_KIND_HTTP, true},
		{"unspecified", measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, false},
		{"ICMP", measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, false},
		{"udp", measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, false},
		{"", measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, false},
	}
	for _, tt := range tests {
		got, ok := ParseProbeKind(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseProbeKind(%q) = %v, %t; want %v, %t", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
	if got := len(ProbeKinds()); got != 4 {
		t.Errorf("ProbeKinds() has %d kinds, want 4", got)
	}
}

// TestRunEnded judges every run state the protocol has: a state added to
// the enum fails here until it is placed on one side.
func TestRunEnded(t *testing.T) {
	want := map[measurev1.RunState]bool{
		measurev1.RunState_RUN_STATE_UNSPECIFIED: false,
		measurev1.RunState_RUN_STATE_QUEUED:      false,
		measurev1.RunState_RUN_STATE_RUNNING:     false,
		measurev1.RunState_RUN_STATE_SUCCEEDED:   true,
		measurev1.RunState_RUN_STATE_FAILED:      true,
		measurev1.RunState_RUN_STATE_INTERRUPTED: true,
		measurev1.RunState_RUN_STATE_CANCELED:    true,
	}
	for v, name := range measurev1.RunState_name {
		s := measurev1.RunState(v)
		w, ok := want[s]
		if !ok {
			t.Errorf("%s: no verdict in this test; say whether a run in it has ended", name)
			continue
		}
		if got := RunEnded(s); got != w {
			t.Errorf("RunEnded(%s) = %t, want %t", name, got, w)
		}
	}
}

// TestParseOrigin: the CLI's names and the enum's, any case; anything else
// is refused, naming the value.
func TestParseOrigin(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    measurev1.RunOrigin
		wantErr bool
	}{
		{"client", measurev1.RunOrigin_RUN_ORIGIN_CLIENT, false},
		{" Monitor ", measurev1.RunOrigin_RUN_ORIGIN_MONITOR, false},
		{"RUN_ORIGIN_MONITOR", measurev1.RunOrigin_RUN_ORIGIN_MONITOR, false},
		{"run_origin_client", measurev1.RunOrigin_RUN_ORIGIN_CLIENT, false},
		{"RUN_ORIGIN_UNSPECIFIED", 0, true},
		{"unspecified", 0, true},
		{"", 0, true},
		{"monitor-light", 0, true},
	} {
		got, err := ParseOrigin(tt.in)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
				t.Errorf("ParseOrigin(%q): error %v, want ErrInvalid naming the value", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseOrigin(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestOriginName names every origin, ParseOrigin's inverse where it has one.
func TestOriginName(t *testing.T) {
	for o, want := range map[measurev1.RunOrigin]string{
		measurev1.RunOrigin_RUN_ORIGIN_CLIENT: "client", measurev1.RunOrigin_RUN_ORIGIN_MONITOR: "monitor",
		measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED: "unspecified", measurev1.RunOrigin(9): "9",
	} {
		if got := OriginName(o); got != want {
			t.Errorf("OriginName(%v) = %q, want %q", o, got, want)
		}
		if back, err := ParseOrigin(want); err == nil && back != o {
			t.Errorf("ParseOrigin(OriginName(%v)) = %v", o, back)
		}
	}
}

// TestProbeTestName: every probe kind's test name parses back to it;
// a test's name, a bare kind, an unknown kind and the wrong case do not.
func TestProbeTestName(t *testing.T) {
	want := map[measurev1.ProbeKind]string{
		measurev1.ProbeKind_PROBE_KIND_ICMP: "probe_icmp", measurev1.ProbeKind_PROBE_KIND_ICMP_MTU: "probe_icmp_mtu",
		measurev1.ProbeKind_PROBE_KIND_TCP: "probe_tcp", measurev1.ProbeKind_PROBE_KIND_HTTP: "probe_http",
	}
	for _, k := range ProbeKinds() {
		name := ProbeTestName(k)
		if name != want[k] {
			t.Errorf("ProbeTestName(%v) = %q, want %q", k, name, want[k])
		}
		if got, ok := ParseProbeTestName(name); !ok || got != k {
			t.Errorf("ParseProbeTestName(%q) = %v, %v; want %v", name, got, ok, k)
		}
	}
	for _, k := range []measurev1.ProbeKind{measurev1.ProbeKind_PROBE_KIND_UNSPECIFIED, measurev1.ProbeKind(99), measurev1.ProbeKind(-1)} {
		if IsProbeKind(k) || slices.Contains(ProbeKinds(), k) {
			t.Errorf("IsProbeKind(%v) = %v, ProbeKinds holds it %v; want neither", k, IsProbeKind(k), slices.Contains(ProbeKinds(), k))
		}
	}
	for _, k := range ProbeKinds() {
		if !IsProbeKind(k) {
			t.Errorf("IsProbeKind(%v) = false for a kind of ProbeKinds", k)
		}
	}
	for _, name := range []string{"ping", "icmp", "probe_", "probe_udp", "PROBE_ICMP", "probe_unspecified", ""} {
		if k, ok := ParseProbeTestName(name); ok {
			t.Errorf("ParseProbeTestName(%q) = %v, want none", name, k)
		}
	}
}
