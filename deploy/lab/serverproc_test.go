package lab

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// serverProcEnv names the environment variable that makes the test binary
// one of the lab tests' server processes instead of running tests: its
// value is "ROLE SPEC", ROLE a key of serverProcs and SPEC what that role
// reads. TestMain looks at it before anything else, so a server process
// runs no test and reports no skip.
const serverProcEnv = "MESHPERF_LAB_SERVER"

// serverProcs holds the server processes the lab tests start inside lab
// namespaces, in a process apart from the test's own as a peer agent's
// servers are the peer's: each serves until its own bound ends and
// returns an error if it could not serve. Files add their roles in init.
var serverProcs = map[string]func(spec string) error{}

// runServerProc runs the server process serverProcEnv names, if any, and
// reports whether it did and the exit code; an unknown role is an error.
func runServerProc() (code int, ran bool) {
	v, ok := os.LookupEnv(serverProcEnv)
	if !ok {
		return 0, false
	}
	role, spec := v, ""
	if i := strings.IndexByte(v, ' '); i >= 0 {
		role, spec = v[:i], v[i+1:]
	}
	run, ok := serverProcs[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: unknown server role %q\n", serverProcEnv, role)
		return 2, true
	}
	if err := run(spec); err != nil {
		fmt.Fprintf(os.Stderr, "%s server: %v\n", role, err)
		return 1, true
	}
	return 0, true
}

// startServerProc starts the test binary again as the server process role
// (with spec) inside the lab namespace nsPath; startIn kills it at the
// latest when the test ends.
func startServerProc(t *testing.T, nsPath, role, spec string) *server {
	t.Helper()
	if _, ok := serverProcs[role]; !ok {
		t.Fatalf("no server role %q", role)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startIn(t, nsPath, "env", serverProcEnv+"="+role+" "+spec, exe)
}
