package lab

import (
	_ "embed"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// toolsTxt is tools.txt: the programs the lab, its faults, the agent and
// the lab's tests need, with their Debian packages; install-deps.sh
// reads the same file.
//
//go:embed tools.txt
var toolsTxt string

// toolEntry is one line of tools.txt.
type toolEntry struct {
	name, pkg string
	users     []string // lab, fault, agent, labtest
}

// parseTools parses tools.txt's format: "#" comments and blank lines,
// else "PROGRAM PACKAGE USER[,USER...]" separated by blanks. It refuses a
// line of another shape, an unknown user and a program listed twice.
func parseTools(text string) ([]toolEntry, error) {
	var out []toolEntry
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("tools.txt:%d: %q: want PROGRAM PACKAGE USERS", i+1, line)
		}
		e := toolEntry{name: f[0], pkg: f[1], users: strings.Split(f[2], ",")}
		for _, u := range e.users {
			if !slices.Contains([]string{"lab", "fault", "agent", "labtest"}, u) {
				return nil, fmt.Errorf("tools.txt:%d: user %q: want lab, fault, agent or labtest", i+1, u)
			}
		}
		if slices.ContainsFunc(out, func(o toolEntry) bool { return o.name == e.name }) {
			return nil, fmt.Errorf("tools.txt:%d: %s listed twice", i+1, e.name)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tools.txt lists no program")
	}
	return out, nil
}

// toolsFor returns, in tools.txt's order, the programs that any of users
// needs. It panics if the embedded tools.txt does not parse (its test
// fails first).
func toolsFor(users ...string) []string {
	entries, err := parseTools(toolsTxt)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, e := range entries {
		if slices.ContainsFunc(e.users, func(u string) bool { return slices.Contains(users, u) }) {
			out = append(out, e.name)
		}
	}
	return out
}

// checkPrograms returns an ErrUnsupported error naming every program of
// names (tools or faultTools) that is not on $PATH; nil if all are.
func checkPrograms(names []string) error {
	var missing []string
	for _, t := range names {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing programs %s (run deploy/lab/install-deps.sh)", ErrUnsupported, strings.Join(missing, ", "))
	}
	return nil
}
