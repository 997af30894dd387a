// Command testlog turns `go test -json` on its standard input into go
// test's usual output on its standard output (a line per package: ok,
// FAIL or "no test files"; a failing test's output in full; build
// errors), followed by one line per skipped test:
//
//	SKIPPED: github.com/meshperf/meshperf/deploy/lab TestUp: needs root: the lab creates network namespaces
//
// and, for a package whose tests all passed without one of them running
// (a TestMain that exits first), "SKIPPED: PKG: no test ran: LAST LINE".
// It exits 1 when a test or a package failed or the input held no
// package, and, with CI=true in its environment, when a skip's reason
// marks a missing tool or privilege (internal/testskip's prefixes); else
// 0. `make test` runs
//
//	go test -json ... | go run ./internal/testlog
//
// under pipefail, so go test's own failure fails it too.
package main

import (
	"bufio"
	"os"
)

func main() {
	out := bufio.NewWriter(os.Stdout)
	code := filter(os.Stdin, out, os.Getenv("CI") == "true")
	if err := out.Flush(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}
