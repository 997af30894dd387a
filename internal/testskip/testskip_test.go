package testskip_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testskip"
)

// run calls f through Reason and returns the skip's reason ("" if none).
func run(f func(testing.TB)) string {
	reason, _ := testskip.Reason(f)
	return reason
}

func TestTools(t *testing.T) {
	tests := []struct {
		name  string
		hint  string
		tools []string
		want  string
	}{
		{"present", "", []string{"sh"}, ""},
		{"missing with a hint", "iproute2", []string{"sh", "meshperf-no-such-tool"}, "missing tool: meshperf-no-such-tool (iproute2)"},
		{"missing without a hint", "", []string{"meshperf-no-such-tool", "sh"}, "missing tool: meshperf-no-such-tool"},
		{"first missing named", "", []string{"meshperf-no-a", "meshperf-no-b"}, "missing tool: meshperf-no-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(func(tb testing.TB) { testskip.Tools(tb, tt.hint, tt.tools...) })
			if got != tt.want {
				t.Errorf("reason %q, want %q", got, tt.want)
			}
			if tt.want != "" && !testskip.Environmental(got) {
				t.Errorf("reason %q is not Environmental", got)
			}
		})
	}
}

func TestRoot(t *testing.T) {
	got := run(func(tb testing.TB) { testskip.Root(tb, "the lab creates network namespaces") })
	want := ""
	if os.Geteuid() != 0 {
		want = "needs root: the lab creates network namespaces"
	}
	if got != want {
		t.Errorf("euid %d: reason %q, want %q", os.Geteuid(), got, want)
	}
}

// TestLab: root first, then the tools.
func TestLab(t *testing.T) {
	root := os.Geteuid() == 0
	tests := []struct {
		name  string
		tools []string
		want  string
	}{
		{"tools present", []string{"sh"}, ""},
		{"tool missing", []string{"meshperf-no-such-tool"}, "missing tool: meshperf-no-such-tool (hint)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if !root {
				want = "needs root: the lab creates network namespaces"
			}
			if got := run(func(tb testing.TB) { testskip.Lab(tb, "hint", tt.tools...) }); got != want {
				t.Errorf("reason %q, want %q", got, want)
			}
		})
	}
}

func TestEnvironmental(t *testing.T) {
	tests := []struct {
		reason string
		want   bool
	}{
		{"missing tool: tc (iproute2)", true},
		{"needs root: raw ICMP sockets (root or CAP_NET_RAW): operation not permitted", true},
		{"a latency comparison: run it alone with `make fidelity` (MESHPERF_FIDELITY=1)", false},
		{"runs real tools; skipped with -short", false},
		{"the test's server process: missing tool: x", false}, // the prefix starts the reason, or it is not one
		{"Missing tool: tc", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := testskip.Environmental(tt.reason); got != tt.want {
			t.Errorf("Environmental(%q) = %t, want %t", tt.reason, got, tt.want)
		}
	}
}

// environmentalWords mark a skip reason as about a tool or a privilege.
var environmentalWords = []string{"install", "root", "cap_net", "not found", "needs ", "privilege"}

// TestSkipsHaveTheirShape reads every Go file of the module: a t.Skip or
// t.Skipf whose literal reason speaks of a tool or a privilege (installed,
// root, CAP_NET_RAW, needs ...) must start with ToolPrefix or RootPrefix,
// so that CI (internal/testlog) fails on it rather than pass it by.
func TestSkipsHaveTheirShape(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..")) // the test runs in internal/testskip
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod two levels up: %v", err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "proto") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Skip" && sel.Sel.Name != "Skipf") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			reason, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			n++
			lower := strings.ToLower(reason)
			for _, w := range environmentalWords {
				if strings.Contains(lower, w) && !testskip.Environmental(reason) {
					rel, _ := filepath.Rel(root, fset.Position(lit.Pos()).Filename)
					t.Errorf("%s:%d: skip %q speaks of %q: start it with %q or %q", rel, fset.Position(lit.Pos()).Line,
						reason, w, testskip.ToolPrefix, testskip.RootPrefix)
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Errorf("found only %d skips with a literal reason under %s: the walk is broken", n, root)
	}
}

// TestReason: Skip and Skipf are recorded and stop f, a return is no
// skip, and another panic of f is not swallowed.
func TestReason(t *testing.T) {
	tests := []struct {
		name        string
		f           func(testing.TB)
		want        string
		wantSkipped bool
	}{
		{"skip", func(tb testing.TB) { tb.Skip("missing tool: ", "tc"); panic("Skip returned") }, "missing tool: tc", true},
		{"skipf", func(tb testing.TB) { tb.Skipf("needs root: %s", "raw sockets"); panic("Skipf returned") }, "needs root: raw sockets", true},
		{"no skip", func(tb testing.TB) { tb.Helper() }, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skipped := testskip.Reason(tt.f)
			if got != tt.want || skipped != tt.wantSkipped {
				t.Errorf("Reason = %q, %v; want %q, %v", got, skipped, tt.want, tt.wantSkipped)
			}
		})
	}
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("panic %v went through Reason as %v, want it passed on", "boom", p)
		}
	}()
	testskip.Reason(func(testing.TB) { panic("boom") })
	t.Error("Reason swallowed f's panic")
}
