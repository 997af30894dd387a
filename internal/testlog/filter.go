package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/meshperf/meshperf/internal/testskip"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus
// the build events of Go 1.24).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output
	FailedBuild string // a package's fail: the package that did not build
}

// skip is one skipped test, or a package none of whose tests ran (test
// empty).
type skip struct {
	pkg, test, reason string
	// env: the skip is for a missing tool or privilege (testskip's
	// prefixes; for a package, on the last line it printed).
	env bool
}

// String is the skip's line in the summary.
func (s skip) String() string {
	if s.test == "" {
		return fmt.Sprintf("SKIPPED: %s: %s", s.pkg, s.reason)
	}
	return fmt.Sprintf("SKIPPED: %s %s: %s", s.pkg, s.test, s.reason)
}

// line is one output line of a test, kept until its top-level test ends.
type line struct {
	test, text string
}

// pkgState is what the filter keeps of a package until it ends.
type pkgState struct {
	ran   int               // tests started
	tests map[string][]line // by top-level test: its and its subtests' output
	out   []string          // output outside any test
}

// drop forgets the output of test (top or one of its subtests) and its
// subtests: go test without -v shows none of a test that did not fail.
func (p *pkgState) drop(top, test string) {
	if test == top {
		delete(p.tests, top)
		return
	}
	kept := p.tests[top][:0]
	for _, l := range p.tests[top] {
		if l.test != test && !strings.HasPrefix(l.test, test+"/") {
			kept = append(kept, l)
		}
	}
	p.tests[top] = kept
}

// logLine is the start of a t.Log / t.Skip line: indent, file:line, ": ".
var logLine = regexp.MustCompile(`^\s+[\w.+-]+\.go:\d+: `)

// filter reads go test -json from r and writes the human output and the
// skips to w; it returns the exit status (see the command's doc).
func filter(r io.Reader, w io.Writer, ci bool) int {
	pkgs := map[string]*pkgState{}
	state := func(name string) *pkgState {
		p := pkgs[name]
		if p == nil {
			p = &pkgState{tests: map[string][]line{}}
			pkgs[name] = p
		}
		return p
	}
	var (
		skips   []skip
		failed  bool
		nPkgs   int
		scanner = bufio.NewScanner(r)
	)
	scanner.Buffer(make([]byte, 64<<10), 16<<20)
	for scanner.Scan() {
		raw := scanner.Bytes()
		var e event
		if err := json.Unmarshal(raw, &e); err != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", raw) // not an event: pass it on
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
			continue
		case e.Action == "build-fail":
			failed = true
			continue
		case e.Package == "": // no package's: pass it on
			fmt.Fprint(w, e.Output)
			continue
		}
		p := state(e.Package)
		top, _, _ := strings.Cut(e.Test, "/")
		switch {
		case e.Action == "output" && e.Test != "":
			p.tests[top] = append(p.tests[top], line{e.Test, e.Output})
		case e.Action == "output":
			p.out = append(p.out, e.Output)
		case e.Action == "run":
			p.ran++
		case e.Test != "" && e.Action == "skip":
			reason := skipReason(p.tests[top], e.Test)
			skips = append(skips, skip{e.Package, e.Test, reason, testskip.Environmental(reason)})
			p.drop(top, e.Test)
		case e.Test != "" && e.Action == "pass":
			p.drop(top, e.Test)
		case e.Test != "" && e.Action == "fail" && e.Test == top:
			failed = true
			printTest(w, p.tests[top])
			delete(p.tests, top)
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			nPkgs++
			if e.Action == "fail" {
				failed = true
				endFailed(w, p)
			} else {
				endPassed(w, p)
				if e.Action == "pass" && p.ran == 0 {
					last := lastWords(p.out)
					skips = append(skips, skip{e.Package, "", "no test ran: " + last, testskip.Environmental(last)})
				}
			}
			delete(pkgs, e.Package)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(w, "testlog: reading go test -json: %v\n", err)
		failed = true
	}
	// Packages that never ended (go test killed): show what they printed.
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "testlog: %s did not finish\n", name)
		endFailed(w, pkgs[name])
		failed = true
	}
	return summary(w, skips, failed, nPkgs, ci)
}

// summary writes the skip list and the verdict, and returns the status.
func summary(w io.Writer, skips []skip, failed bool, nPkgs int, ci bool) int {
	env := 0
	if len(skips) == 0 {
		fmt.Fprintln(w, "SKIPPED: none")
	}
	for _, s := range skips {
		mark := ""
		if s.env {
			env++
			mark = " [missing tool or privilege]"
		}
		fmt.Fprintln(w, s.String()+mark)
	}
	if nPkgs == 0 {
		fmt.Fprintln(w, "testlog: no package in the input")
		failed = true
	}
	if ci && env > 0 {
		fmt.Fprintf(w, "FAIL: %d skipped for a missing tool or privilege; CI (CI=true) runs them all\n", env)
		failed = true
	}
	if failed {
		return 1
	}
	return 0
}

// skipReason returns the reason test was skipped with: its last log line
// (the t.Skip message, without its file:line) and that line's
// continuation lines, joined by " | "; "(no reason given)" if none.
func skipReason(lines []line, test string) string {
	var own []string
	for _, l := range lines {
		if l.test == test {
			own = append(own, strings.TrimRight(l.text, "\n"))
		}
	}
	start := -1
	for i, text := range own {
		if logLine.MatchString(text) {
			start = i
		}
	}
	if start < 0 {
		return "(no reason given)"
	}
	parts := []string{logLine.ReplaceAllString(own[start], "")}
	for _, text := range own[start+1:] {
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "--- ") || strings.HasPrefix(trimmed, "=== ") {
			continue
		}
		parts = append(parts, trimmed)
	}
	return strings.Join(parts, " | ")
}

// printTest writes a failed test's output as go test does without -v:
// everything but the === framing lines.
func printTest(w io.Writer, lines []line) {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l.text), "=== ") {
			continue
		}
		fmt.Fprint(w, l.text)
	}
}

// endPassed writes a passing (or test-less) package's summary line.
func endPassed(w io.Writer, p *pkgState) {
	for _, text := range p.out {
		if strings.HasPrefix(text, "ok  \t") || strings.HasPrefix(text, "?   \t") {
			fmt.Fprint(w, text)
		}
	}
}

// endFailed writes what a failing package printed outside its tests and
// the output of its tests that never ended (a panic, a timeout).
func endFailed(w io.Writer, p *pkgState) {
	tops := make([]string, 0, len(p.tests))
	for top := range p.tests {
		tops = append(tops, top)
	}
	sort.Strings(tops)
	for _, top := range tops {
		printTest(w, p.tests[top])
	}
	for _, text := range p.out {
		fmt.Fprint(w, text)
	}
}

// lastWords is the last non-empty line a package printed outside its
// tests before its summary line, or "(nothing printed)".
func lastWords(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		text := strings.TrimSpace(out[i])
		if text == "" || text == "PASS" || strings.HasPrefix(text, "ok  ") || strings.HasPrefix(text, "ok\t") {
			continue
		}
		return text
	}
	return "(nothing printed)"
}
