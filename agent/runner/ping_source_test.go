package runner

import (
	"strings"
	"testing"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestPingTarget(t *testing.T) {
	tests := []struct {
		header, want string
	}{
		{"PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.", "127.0.0.1"},
		{"PING ::1(::1) 56 data bytes", "::1"},
		{"PING fe80::1%eth0(fe80::1%eth0) 56 data bytes", "fe80::1"},
		{"PING ::ffff:10.0.0.5(::ffff:10.0.0.5) 56 data bytes", "10.0.0.5"},
		{"PING host (not-an-ip) 56(84) bytes of data.", ""},
		{"no header", ""},
	}
	for _, tt := range tests {
		a, ok := pingTarget(tt.header + "\n")
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("pingTarget(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

// TestPingSourcesIPv6: replies from another IPv6 address do not count;
// without a header, ping's own (DIFFERENT ADDRESS!) flag decides.
func TestPingSourcesIPv6(t *testing.T) {
	const body = `64 bytes from ::1: icmp_seq=1 ttl=64 time=0.085 ms
64 bytes from fd00::9: icmp_seq=2 ttl=64 time=0.078 ms (DIFFERENT ADDRESS!)

--- ::1 ping statistics ---
2 packets transmitted, 2 received, 0% packet loss, time 202ms
rtt min/avg/max/mdev = 0.078/0.081/0.085/0.003 ms
`
	for _, tt := range []struct {
		name, stdout string
	}{
		{"header", "PING ::1(::1) 56 data bytes\n" + body},
		{"no header: ping's flag", body},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, note, err := parsePing(proc.Output{Stdout: []byte(tt.stdout)}, 2)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetPacketsReceived() != 1 || m.GetLossRatio() != 0.5 || m.GetRttMinSeconds() != 85e-6 {
				t.Errorf("metrics %v: want 1 of 2 from the target, rtt 0.085 ms", m)
			}
			if !strings.Contains(note, "fd00::9 x1") {
				t.Errorf("note %q does not name fd00::9", note)
			}
		})
	}
	// Every reply from elsewhere: unreachable.
	_, _, err := parsePing(proc.Output{Stdout: []byte("PING ::2(::2) 56 data bytes\n" + body)}, 2)
	if f := asFailure(err); err == nil || f.Status != measurev1.Status_STATUS_UNREACHABLE || !strings.Contains(f.Message, "0/2 echo replies from ::2") {
		t.Errorf("err %v, want unreachable: 0/2 echo replies from ::2", err)
	}
}
