package testspec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestTestProperties(t *testing.T) {
	tests := []struct {
		test   measurev1.Test
		name   string
		tool   measurev1.Tool
		heavy  bool
		server bool
		udp    bool
	}{
		{measurev1.Test_TEST_PING, "ping", measurev1.Tool_TOOL_PING, false, false, false},
		{measurev1.Test_TEST_QPERF_TCP_LAT, "qperf_tcp_lat", measurev1.Tool_TOOL_QPERF, true, true, false},
		{measurev1.Test_TEST_QPERF_TCP_BW, "qperf_tcp_bw", measurev1.Tool_TOOL_QPERF, true, true, false},
		{measurev1.Test_TEST_QPERF_UDP_LAT, "qperf_udp_lat", measurev1.Tool_TOOL_QPERF, true, true, true},
		{measurev1.Test_TEST_QPERF_UDP_BW, "qperf_udp_bw", measurev1.Tool_TOOL_QPERF, true, true, true},
		{measurev1.Test_TEST_IPERF3_TCP, "iperf3_tcp", measurev1.Tool_TOOL_IPERF3, true, true, false},
		{measurev1.Test_TEST_IPERF3_UDP, "iperf3_udp", measurev1.Tool_TOOL_IPERF3, true, true, true},
		{measurev1.Test_TEST_HTTP, "http", measurev1.Tool_TOOL_CURL, false, false, false},
		{measurev1.Test_TEST_HTTP_LOAD, "http_load", measurev1.Tool_TOOL_AB, true, false, false},
		{measurev1.Test_TEST_UNSPECIFIED, "unspecified", measurev1.Tool_TOOL_UNSPECIFIED, false, false, false},
		{measurev1.Test(42), "test(42)", measurev1.Tool_TOOL_UNSPECIFIED, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Name(tt.test); got != tt.name {
				t.Errorf("Name = %q, want %q", got, tt.name)
			}
			if got := Tool(tt.test); got != tt.tool {
				t.Errorf("Tool = %v, want %v", got, tt.tool)
			}
			if got := IsHeavy(tt.test); got != tt.heavy {
				t.Errorf("IsHeavy = %v, want %v", got, tt.heavy)
			}
			if got := NeedsServer(tt.test); got != tt.server {
				t.Errorf("NeedsServer = %v, want %v", got, tt.server)
			}
			if got, want := UsesHTTPTarget(tt.test), tt.tool == measurev1.Tool_TOOL_CURL || tt.tool == measurev1.Tool_TOOL_AB; got != want {
				t.Errorf("UsesHTTPTarget = %v, want %v", got, want)
			}
			if got := IsUDP(tt.test); got != tt.udp {
				t.Errorf("IsUDP = %v, want %v", got, tt.udp)
			}
			got, err := ParseTest(tt.name)
			if tt.tool == measurev1.Tool_TOOL_UNSPECIFIED {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("ParseTest(%q) = %v, %v; want ErrInvalid", tt.name, got, err)
				}
				return
			}
			if err != nil || got != tt.test {
				t.Errorf("ParseTest(%q) = %v, %v; want %v", tt.name, got, err, tt.test)
			}
			if got, err := ParseTest(tt.test.String()); err != nil || got != tt.test {
				t.Errorf("ParseTest(%q) = %v, %v; want %v", tt.test.String(), got, err, tt.test)
			}
		})
	}
	if got := len(Tests()); got != 9 {
		t.Errorf("len(Tests()) = %d, want 9", got)
	}
}

func TestPathNames(t *testing.T) {
	tests := []struct {
		path measurev1.Path
		name string
	}{
		{measurev1.Path_PATH_HOST_TO_HOST, "host-host"},
		{measurev1.Path_PATH_HOST_TO_POD, "host-pod"},
		{measurev1.Path_PATH_POD_TO_POD, "pod-pod"},
		{measurev1.Path_PATH_POD_TO_SERVICE, "pod-service"},
		{measurev1.Path_PATH_HOST_TO_SERVICE, "host-service"},
		{measurev1.Path_PATH_HOST_TO_EXTERNAL, "host-external"},
		{measurev1.Path_PATH_POD_TO_EXTERNAL, "pod-external"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := IsExternal(tt.path), strings.HasSuffix(tt.name, "-external"); got != want {
				t.Errorf("IsExternal = %v, want %v", got, want)
			}
			if got := PathName(tt.path); got != tt.name {
				t.Errorf("PathName = %q, want %q", got, tt.name)
			}
			for _, s := range []string{tt.name, tt.path.String(), " " + tt.name + " "} {
				if got, err := ParsePath(s); err != nil || got != tt.path {
					t.Errorf("ParsePath(%q) = %v, %v; want %v", s, got, err, tt.path)
				}
			}
		})
	}
	for _, bad := range []string{"", "unspecified", "PATH_UNSPECIFIED", "host-to-host", "pod"} {
		if got, err := ParsePath(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePath(%q) = %v, %v; want ErrInvalid", bad, got, err)
		}
	}
	for _, bad := range []string{"", "TEST_UNSPECIFIED", "qperf", "tcp_lat"} {
		if got, err := ParseTest(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseTest(%q) = %v, %v; want ErrInvalid", bad, got, err)
		}
	}
	if got := len(Paths()); got != 7 {
		t.Errorf("len(Paths()) = %d, want 7", got)
	}
	if got := PathName(measurev1.Path(9)); got != "path(9)" {
		t.Errorf("PathName(9) = %q", got)
	}
}

func TestQperfTestName(t *testing.T) {
	want := map[measurev1.Test]string{
		measurev1.Test_TEST_QPERF_TCP_LAT: "tcp_lat",
		measurev1.Test_TEST_QPERF_TCP_BW:  "tcp_bw",
		measurev1.Test_TEST_QPERF_UDP_LAT: "udp_lat",
		measurev1.Test_TEST_QPERF_UDP_BW:  "udp_bw",
	}
	for _, test := range Tests() {
		if got := QperfTestName(test); got != want[test] {
			t.Errorf("QperfTestName(%v) = %q, want %q", test, got, want[test])
		}
	}
}

// TestProbePaths: the probes take every path to a node and no other, in
// enum order, and IsProbePath agrees with the list on every path value.
func TestProbePaths(t *testing.T) {
	if got, want := PathNamesOf(ProbePaths()), []string{"host-host", "host-pod", "pod-pod", "pod-service", "host-service"}; !slices.Equal(got, want) {
		t.Errorf("ProbePaths = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		path measurev1.Path
		want bool
	}{
		{measurev1.Path_PATH_HOST_TO_HOST, true},
		{measurev1.Path_PATH_POD_TO_SERVICE, true},
		{measurev1.Path_PATH_HOST_TO_SERVICE, true},
		{measurev1.Path_PATH_HOST_TO_EXTERNAL, false},
		{measurev1.Path_PATH_POD_TO_EXTERNAL, false},
		{measurev1.Path_PATH_UNSPECIFIED, false},
		{measurev1.Path(99), false},
	} {
		if got := IsProbePath(tt.path); got != tt.want {
			t.Errorf("IsProbePath(%v) = %v, want %v", tt.path, got, tt.want)
		}
		if got := slices.Contains(ProbePaths(), tt.path); got != tt.want {
			t.Errorf("ProbePaths holds %v: %v, want %v", tt.path, got, tt.want)
		}
	}
}
