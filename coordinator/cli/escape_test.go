package cli

import (
	"bytes"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// rawControls reports the first byte or rune of out that a terminal would
// act on: C0 controls but the newline (and the tab a CSV or table may
// hold between cells, never inside one), DEL, C1 and bidi controls.
func rawControls(out string) string {
	for _, r := range out {
		switch {
		case r == '\n':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f), r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return string(r)
		}
	}
	return ""
}

// TestOutputEscapesControls: ESC sequences and bidi overrides in a
// result's message and tool version, as a store of an older coordinator
// may hold them, are printed escaped in the results table and CSV, and in
// the agents table.
func TestOutputEscapesControls(t *testing.T) {
	ping := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	tests := []struct {
		name    string
		message string
		version string
		want    []string // in the output, escaped
	}{
		{"clear screen in a message", "\x1b[2J\x1b[Hall good", "ping 1", []string{`\x1b[2J\x1b[Hall good`}},
		{"window title in a tool version", "lost", "iperf \x1b]0;owned\x07 3.16", []string{`iperf \x1b]0;owned\a 3.16`}},
		{"bidi override", "ok\u202edeliaf", "curl\u2066 8", []string{`ok\u202edeliaf`, `curl\u2066 8`}},
		{"C1 CSI and DEL", "a\u009b31mb\x7f", "v", []string{`a\u009b31mb\x7f`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := []*measurev1.Result{{RunId: "r1", Spec: ping, Status: measurev1.Status_STATUS_UNREACHABLE,
				Message: tt.message, ToolVersion: tt.version}}
			var table, csvOut bytes.Buffer
			printResults(&options{stdout: &table}, results)
			if err := printResultsCSV(&options{stdout: &csvOut}, results); err != nil {
				t.Fatal(err)
			}
			for name, out := range map[string]string{"table": table.String(), "csv": csvOut.String()} {
				if c := rawControls(out); c != "" {
					t.Errorf("%s output holds raw %q:\n%s", name, c, out)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(csvOut.String(), w) {
					t.Errorf("csv output lacks %q:\n%s", w, csvOut.String())
				}
			}
			if !strings.Contains(table.String(), oneLine(tt.message, 80)) {
				t.Errorf("table lacks the escaped message %q:\n%s", oneLine(tt.message, 80), table.String())
			}
		})
	}
}

// TestOneLineCutsRunes: a long message is cut to its cell on a rune
// boundary.
func TestOneLineCutsRunes(t *testing.T) {
	for n := 4; n < 40; n++ {
		got := oneLine(strings.Repeat("é", 30), n)
		if len(got) > n || !strings.HasSuffix(got, "...") || strings.ContainsRune(got, '\ufffd') {
			t.Fatalf("oneLine(_, %d) = %q", n, got)
		}
	}
}

// TestAgentsTableEscapes: agent and tool versions and partitions are
// escaped in `coordinator agents`.
func TestAgentsTableEscapes(t *testing.T) {
	resp := &meshv1.ListAgentsResponse{Agents: []*meshv1.Agent{{NodeName: "node-1", AgentVersion: "v1\x1b[31m",
		Tools: []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_PING, Version: "ping\u202e1"}}, Partition: "split\x1b[2J"}}}
	out := runAgents(t, resp)
	if c := rawControls(out); c != "" {
		t.Errorf("agents output holds raw %q:\n%s", c, out)
	}
	for _, w := range []string{`v1\x1b[31m`, `ping\u202e1`, `split\x1b[2J`} {
		if !strings.Contains(out, w) {
			t.Errorf("agents output lacks %q:\n%s", w, out)
		}
	}
}

// runAgents runs `coordinator agents` against a MeshService answering resp.
func runAgents(t *testing.T, resp *meshv1.ListAgentsResponse) string {
	t.Helper()
	sock := serveMesh(t, &agentsServer{agents: resp.GetAgents()})
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs([]string{"agents", "--coordinator", "unix://" + sock})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("agents: %v\n%s", err, errOut.String())
	}
	return out.String()
}
