// Package testskip owns the shape of the test skips that CI must not
// accept: a skip for a missing program starts its reason with ToolPrefix,
// a skip for a missing privilege (root, CAP_NET_RAW) with RootPrefix.
// internal/testlog, the filter `make test` runs go test's output through,
// lists every skip and, under CI=true, fails the run on these two kinds
// (Environmental); any other skip (a test that runs alone, -short, a
// capture run by hand) is by design and only listed.
//
// Tools, Root and Lab (both) skip with those prefixes; a test that finds out some
// other way (a raw socket that would not open) skips with the prefix
// itself: t.Skipf(testskip.RootPrefix+"raw ICMP sockets: %v", err).
// Reason tells what a skipping helper says without skipping the test
// that asks. Only test files import this package.
package testskip

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const (
	// ToolPrefix begins the reason of a skip for a program not found in
	// PATH, e.g. "missing tool: tc (deploy/lab/install-deps.sh installs
	// it)".
	ToolPrefix = "missing tool: "
	// RootPrefix begins the reason of a skip for a missing privilege,
	// e.g. "needs root: the lab creates network namespaces".
	RootPrefix = "needs root: "
)

// Tools skips tb, with the reason ToolPrefix + the first missing name
// + " (" + hint + ")" (no parentheses when hint is empty), unless every
// one of tools is found in PATH. It registers no cleanup.
func Tools(tb testing.TB, hint string, tools ...string) {
	tb.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if hint == "" {
				tb.Skip(ToolPrefix + tool)
			}
			tb.Skip(ToolPrefix + tool + " (" + hint + ")")
		}
	}
}

// Root skips tb, with the reason RootPrefix + why, unless the process
// runs as root (effective uid 0). why says what needs it, e.g. "the lab
// creates network namespaces".
func Root(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip(RootPrefix + why)
	}
}

// Lab skips tb unless the process runs as root (Root: the lab creates
// network namespaces) and every one of tools is found in PATH (Tools,
// with hint): what a test that builds a lab (deploy/lab) needs.
func Lab(tb testing.TB, hint string, tools ...string) {
	tb.Helper()
	Root(tb, "the lab creates network namespaces")
	Tools(tb, hint, tools...)
}

// Environmental reports whether reason, a skip's message, marks a
// missing tool or privilege (it starts with ToolPrefix or RootPrefix): a
// skip CI must not accept, since CI runs as root with every tool.
func Environmental(reason string) bool {
	return strings.HasPrefix(reason, ToolPrefix) || strings.HasPrefix(reason, RootPrefix)
}

// Reason calls f with a testing.TB whose Skip and Skipf record the reason
// and stop f (as the real ones do, by not returning), without skipping
// the calling test: how a test checks what a skipping helper (Tools,
// Root, Lab, testnet.Need) says. skipped is false, and reason "", when f
// returned without skipping. Any other panic of f goes on; every other
// testing.TB method is not implemented and panics.
func Reason(f func(testing.TB)) (reason string, skipped bool) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil {
			if p != r {
				panic(p)
			}
			reason, skipped = r.reason, true
		}
	}()
	f(r)
	return "", false
}

// recorder is Reason's testing.TB: its Skip and Skipf panic with the
// recorder itself, which Reason recovers.
type recorder struct {
	testing.TB
	reason string
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) {
	r.reason = fmt.Sprint(args...)
	panic(r)
}

func (r *recorder) Skipf(format string, args ...any) {
	r.reason = fmt.Sprintf(format, args...)
	panic(r)
}
