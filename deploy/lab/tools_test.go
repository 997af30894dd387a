package lab

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseTools(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []string // "name pkg users"
		wantErr string
	}{
		{"lines and comments", "# c\n\nip iproute2 lab\n  tc   iproute2   fault,labtest  \n", []string{"ip iproute2 lab", "tc iproute2 fault,labtest"}, ""},
		{"two fields", "ip iproute2\n", nil, "tools.txt:1"},
		{"four fields", "ip iproute2 lab extra\n", nil, "want PROGRAM PACKAGE USERS"},
		{"unknown user", "ip iproute2 lab,ops\n", nil, `user "ops"`},
		{"twice", "ip iproute2 lab\nip iproute2 fault\n", nil, "tools.txt:2: ip listed twice"},
		{"empty", "# nothing\n", nil, "lists no program"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTools(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, e := range got {
				lines = append(lines, e.name+" "+e.pkg+" "+strings.Join(e.users, ","))
			}
			if !slices.Equal(lines, tt.want) {
				t.Errorf("got %q, want %q", lines, tt.want)
			}
		})
	}
}

// TestInstallDepsReadsTheToolList: install-deps.sh --list prints the
// programs and packages the lab package embeds, in the same order, so
// the script installs what the lab checks.
func TestInstallDepsReadsTheToolList(t *testing.T) {
	entries, err := parseTools(toolsTxt)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		want = append(want, e.name+" "+e.pkg)
	}
	out, err := exec.Command("bash", "install-deps.sh", "--list").Output()
	if err != nil {
		t.Fatalf("install-deps.sh --list: %v", err)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(got, want) {
		t.Errorf("install-deps.sh --list:\n%s\nwant tools.txt's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLabChecksListedTools: the lab's checks are tools.txt's lists, and
// every program the lab's code runs (the argv[0] of each r.run, of each
// NSExec, found in its source) is among the programs Up or Inject check
// first, so a missing one is an ErrUnsupported naming it rather than a
// failure halfway through building a lab.
func TestLabChecksListedTools(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"tools", tools, toolsFor("lab")},
		{"faultTools", faultTools, toolsFor("fault")},
	} {
		if len(c.got) == 0 || !slices.Equal(c.got, c.want) {
			t.Errorf("%s checks %q, want tools.txt's %q", c.name, c.got, c.want)
		}
	}
	checked := append(toolsFor("lab"), toolsFor("fault")...)
	run := programsRun(t)
	for _, p := range []string{"ip", "bridge", "iptables", "ip6tables-restore", "sysctl", "tc", "nsenter"} {
		if _, ok := run[p]; !ok {
			t.Errorf("the scan of the lab's source did not find %s, which it runs: the scan is broken", p)
		}
	}
	for p, where := range run {
		if !slices.Contains(checked, p) {
			t.Errorf("%s runs %s, which neither Up nor Inject checks: add it to tools.txt", where, p)
		}
	}
}

// programsRun returns the programs the lab package's non-test code runs,
// each with the first file:line that does: argv[0] of r.run(ctx, stdin,
// argv...) and of NSExec(ns, argv...), as a literal, the first element
// of a []string literal, or a local variable assigned such literals.
func programsRun(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			assigned := assignedStrings(fn.Body)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				argv := -1
				switch calleeName(call) {
				case "NSExec":
					argv = 1
				case "run":
					argv = 2
				}
				if argv < 0 || len(call.Args) <= argv {
					return true
				}
				for _, p := range programsOf(call.Args[argv], assigned) {
					if _, seen := out[p]; !seen {
						out[p] = fmt.Sprintf("%s:%d", path, fset.Position(call.Pos()).Line)
					}
				}
				return true
			})
		}
	}
	return out
}

func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// programsOf returns the program an argv[0] expression names.
func programsOf(e ast.Expr, assigned map[string][]string) []string {
	switch x := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
			return []string{s}
		}
	case *ast.Ident:
		return assigned[x.Name]
	case *ast.CompositeLit:
		if len(x.Elts) > 0 {
			return programsOf(x.Elts[0], assigned)
		}
	case *ast.CallExpr:
		switch calleeName(x) {
		case "append":
			if len(x.Args) > 0 {
				return programsOf(x.Args[0], assigned)
			}
		case "NSExec":
			return []string{"nsenter"}
		}
	}
	return nil
}

// assignedStrings maps each local variable of body to the string
// literals (or first elements of []string literals) assigned to it.
func assignedStrings(body *ast.BlockStmt) map[string][]string {
	out := map[string][]string{}
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, l := range as.Lhs {
			id, ok := l.(*ast.Ident)
			if !ok {
				continue
			}
			switch r := as.Rhs[i].(type) {
			case *ast.BasicLit, *ast.CompositeLit:
				out[id.Name] = append(out[id.Name], programsOf(r, nil)...)
			}
		}
		return true
	})
	return out
}

// checkPrograms names every missing program, and only those, in an
// ErrUnsupported error.
func TestCheckPrograms(t *testing.T) {
	for _, tt := range []struct {
		names   []string
		missing string // "" means no error
	}{
		{[]string{"sh"}, ""},
		{nil, ""},
		{[]string{"sh", "meshperf-no-such-a", "meshperf-no-such-b"}, "missing programs meshperf-no-such-a, meshperf-no-such-b "},
	} {
		err := checkPrograms(tt.names)
		if tt.missing == "" {
			if err != nil {
				t.Errorf("checkPrograms(%q) = %v, want nil", tt.names, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.missing) {
			t.Errorf("checkPrograms(%q) = %v, want ErrUnsupported naming %q", tt.names, err, tt.missing)
		}
	}
}
