package testspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// testInfo is what this package knows about one Test.
type testInfo struct {
	name  string         // short CLI name
	tool  measurev1.Tool // the client tool
	qperf string         // qperf's test name, for qperf tests
}

var tests = map[measurev1.Test]testInfo{
	measurev1.Test_TEST_PING:          {name: "ping", tool: measurev1.Tool_TOOL_PING},
	measurev1.Test_TEST_QPERF_TCP_LAT: {name: "qperf_tcp_lat", tool: measurev1.Tool_TOOL_QPERF, qperf: "tcp_lat"},
	measurev1.Test_TEST_QPERF_TCP_BW:  {name: "qperf_tcp_bw", tool: measurev1.Tool_TOOL_QPERF, qperf: "tcp_bw"},
	measurev1.Test_TEST_QPERF_UDP_LAT: {name: "qperf_udp_lat", tool: measurev1.Tool_TOOL_QPERF, qperf: "udp_lat"},
	measurev1.Test_TEST_QPERF_UDP_BW:  {name: "qperf_udp_bw", tool: measurev1.Tool_TOOL_QPERF, qperf: "udp_bw"},
	measurev1.Test_TEST_IPERF3_TCP:    {name: "iperf3_tcp", tool: measurev1.Tool_TOOL_IPERF3},
	measurev1.Test_TEST_IPERF3_UDP:    {name: "iperf3_udp", tool: measurev1.Tool_TOOL_IPERF3},
	measurev1.Test_TEST_HTTP:          {name: "http", tool: measurev1.Tool_TOOL_CURL},
	measurev1.Test_TEST_HTTP_LOAD:     {name: "http_load", tool: measurev1.Tool_TOOL_AB},
}

var paths = map[measurev1.Path]string{
	measurev1.Path_PATH_HOST_TO_HOST:     "host-host",
	measurev1.Path_PATH_HOST_TO_POD:      "host-pod",
	measurev1.Path_PATH_POD_TO_POD:       "pod-pod",
	measurev1.Path_PATH_POD_TO_SERVICE:   "pod-service",
	measurev1.Path_PATH_HOST_TO_SERVICE:  "host-service",
	measurev1.Path_PATH_HOST_TO_EXTERNAL: "host-external",
	measurev1.Path_PATH_POD_TO_EXTERNAL:  "pod-external",
}

// IsExternal reports whether p goes to an external target (its results'
// dst_node is the target's name) rather than to a node.
func IsExternal(p measurev1.Path) bool {
	return p == measurev1.Path_PATH_HOST_TO_EXTERNAL || p == measurev1.Path_PATH_POD_TO_EXTERNAL
}

// ProbePaths returns the paths the continuous probes take, every path
// to a node, in enum order: host-host, host-pod, pod-pod, pod-service,
// host-service (no external path). A new slice each call.
func ProbePaths() []measurev1.Path {
	node, _ := SplitPaths(Paths())
	return node
}

// IsProbePath reports whether p is one of ProbePaths.
func IsProbePath(p measurev1.Path) bool {
	_, ok := paths[p]
	return ok && !IsExternal(p)
}

// Tests returns every valid Test in enum order.
func Tests() []measurev1.Test { return slices.Sorted(maps.Keys(tests)) }

// DefaultTests are the tests of a run that names none, in this order:
// ping, qperf tcp_lat and tcp_bw, iperf3 TCP and HTTP. A new slice each
// call.
func DefaultTests() []measurev1.Test {
	return []measurev1.Test{
		measurev1.Test_TEST_PING, measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_TCP_BW,
		measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_HTTP,
	}
}

// DefaultPaths are the paths of a run that names none: host-host,
// host-pod, pod-pod and pod-service (a run with external targets adds
// host-external and pod-external). A new slice each call.
func DefaultPaths() []measurev1.Path {
	return []measurev1.Path{
		measurev1.Path_PATH_HOST_TO_HOST,
		measurev1.Path_PATH_HOST_TO_POD,
		measurev1.Path_PATH_POD_TO_POD,
		measurev1.Path_PATH_POD_TO_SERVICE,
	}
}

// Paths returns every valid Path in enum order.
func Paths() []measurev1.Path { return slices.Sorted(maps.Keys(paths)) }

// Tool returns the client tool of test, or TOOL_UNSPECIFIED for an unknown
// or unspecified test.
func Tool(test measurev1.Test) measurev1.Tool { return tests[test].tool }

// QperfTestName returns qperf's own name of a qperf test ("tcp_lat",
// "tcp_bw", "udp_lat", "udp_bw"), or "" for other tests.
func QperfTestName(test measurev1.Test) string { return tests[test].qperf }

// IsHeavy reports whether test loads the link or needs a server of its own
// (qperf, iperf3 and http_load tests), so that it must not run at the same
// time as another heavy test on the same nodes: such tests run in the
// rounds. Ping and HTTP (one GET) are light.
func IsHeavy(test measurev1.Test) bool {
	switch Tool(test) {
	case measurev1.Tool_TOOL_QPERF, measurev1.Tool_TOOL_IPERF3, measurev1.Tool_TOOL_AB:
		return true
	}
	return false
}

// NeedsServer reports whether test needs a server started for it on the
// destination (qperf and iperf3). HTTP and http_load use the agent's
// always-up HTTP target (UsesHTTPTarget); ping needs nothing.
func NeedsServer(test measurev1.Test) bool {
	switch Tool(test) {
	case measurev1.Tool_TOOL_QPERF, measurev1.Tool_TOOL_IPERF3:
		return true
	}
	return false
}

// UsesHTTPTarget reports whether test's client sends to the destination
// agent's HTTP target (curl for TEST_HTTP, ab for TEST_HTTP_LOAD): no
// server starts for it, and its port must be the http_port the
// destination registered.
func UsesHTTPTarget(test measurev1.Test) bool {
	switch Tool(test) {
	case measurev1.Tool_TOOL_CURL, measurev1.Tool_TOOL_AB:
		return true
	}
	return false
}

// IsUDP reports whether test is a UDP test (qperf udp_*, iperf3 UDP).
func IsUDP(test measurev1.Test) bool {
	switch test {
	case measurev1.Test_TEST_QPERF_UDP_LAT, measurev1.Test_TEST_QPERF_UDP_BW, measurev1.Test_TEST_IPERF3_UDP:
		return true
	}
	return false
}

// Name returns the short CLI name of test: ping, qperf_tcp_lat,
// qperf_tcp_bw, qperf_udp_lat, qperf_udp_bw, iperf3_tcp, iperf3_udp, http,
// http_load. An unspecified or unknown test gives "unspecified" or "test(N)", which
// ParseTest refuses.
func Name(test measurev1.Test) string {
	if test == measurev1.Test_TEST_UNSPECIFIED {
		return "unspecified"
	}
	if info, ok := tests[test]; ok {
		return info.name
	}
	return fmt.Sprintf("test(%d)", int32(test))
}

// ParseTest is the inverse of Name. It also accepts the enum's own name
// ("TEST_QPERF_TCP_LAT"); matching ignores case. The error wraps ErrInvalid.
func ParseTest(s string) (measurev1.Test, error) {
	want := strings.ToLower(strings.TrimSpace(s))
	for t, info := range tests {
		if want == info.name || want == strings.ToLower(t.String()) {
			return t, nil
		}
	}
	return measurev1.Test_TEST_UNSPECIFIED, fmt.Errorf("%w: unknown test %q (want one of %s)", ErrInvalid, s, strings.Join(TestNames(), ", "))
}

// TestNames returns every valid Test's name (Name) in enum order: the
// list a flag's help or an error that refuses a name gives.
func TestNames() []string { return NamesOf(Tests()) }

// NamesOf returns the name (Name) of each of tests, in their order.
func NamesOf(tests []measurev1.Test) []string { return mapNames(tests, Name) }

// mapNames is name(x) for each of xs, in their order.
func mapNames[E any](xs []E, name func(E) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return out
}

// PathName returns the short CLI name of p, "SOURCE-DESTINATION" in the
// enum's words: host-host, host-pod, pod-pod, pod-service, host-service. An
// unspecified or unknown path gives "unspecified" or "path(N)", which
// ParsePath refuses.
func PathName(p measurev1.Path) string {
	if p == measurev1.Path_PATH_UNSPECIFIED {
		return "unspecified"
	}
	if name, ok := paths[p]; ok {
		return name
	}
	return fmt.Sprintf("path(%d)", int32(p))
}

// ParsePath is the inverse of PathName. It also accepts the enum's own name
// ("PATH_POD_TO_SERVICE"); matching ignores case. The error wraps ErrInvalid.
func ParsePath(s string) (measurev1.Path, error) {
	want := strings.ToLower(strings.TrimSpace(s))
	for p, name := range paths {
		if want == name || want == strings.ToLower(p.String()) {
			return p, nil
		}
	}
	return measurev1.Path_PATH_UNSPECIFIED, fmt.Errorf("%w: unknown path %q (want one of %s)", ErrInvalid, s, strings.Join(PathNames(), ", "))
}

// PathNames returns every valid Path's name (PathName) in enum order.
func PathNames() []string { return PathNamesOf(Paths()) }

// PathNamesOf returns the name (PathName) of each of paths, in their
// order.
func PathNamesOf(paths []measurev1.Path) []string { return mapNames(paths, PathName) }

// toolInfo is the two names of one Tool. A tool has one name, its
// program; what its tests reach on the destination has another: curl and
// ab reach the agent's HTTP target, so messages about that end say
// "HTTP", while the agent's own messages about the client say "curl".
type toolInfo struct {
	program string // the client program: ToolProgram
	server  string // what its tests reach on the destination: ToolName; "" for none
}

var tools = map[measurev1.Tool]toolInfo{
	measurev1.Tool_TOOL_PING:   {program: "ping"},
	measurev1.Tool_TOOL_QPERF:  {program: "qperf", server: "qperf"},
	measurev1.Tool_TOOL_IPERF3: {program: "iperf3", server: "iperf3"},
	measurev1.Tool_TOOL_CURL:   {program: "curl", server: "HTTP"},
	measurev1.Tool_TOOL_AB:     {program: "ab", server: "HTTP"},
}

// ToolName is the name of what a tool's tests reach on the destination,
// as the coordinator's messages about starting and checking servers say
// it: "qperf", "iperf3", "HTTP" for curl and ab (the agent's HTTP target);
// else (ping, which reaches no server, and unknown tools) the enum's own
// name, "TOOL_PING". The program itself is ToolProgram.
func ToolName(t measurev1.Tool) string {
	if s := tools[t].server; s != "" {
		return s
	}
	return t.String()
}

// ToolProgram is a tool's program, as the agent's messages and results
// name it: "ping", "qperf", "iperf3", "curl", "ab"; "tool" for an unknown
// or unspecified tool.
func ToolProgram(t measurev1.Tool) string {
	if p := tools[t].program; p != "" {
		return p
	}
	return "tool"
}
