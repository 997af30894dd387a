package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
)

// killPoll is how often Down checks that killed processes are gone.
const killPoll = 20 * time.Millisecond

// killTimeout bounds how long Down waits for killed processes to leave.
const killTimeout = 5 * time.Second

// Down removes the lab named prefix: it kills every process whose network
// namespace is one of the lab's, then deletes the lab's namespaces (which
// removes every interface, route and iptables rule with them). It finds the
// namespaces by name in NetNSDir, so it also cleans up after a crash or a
// half-built lab, and a lab that does not exist is not an error: Down is
// idempotent. A nil logger discards. Errors: ErrInvalidConfig for a bad
// prefix, ErrUnsupported when not root, or the first failures to kill or
// delete (joined).
func Down(ctx context.Context, prefix string, logger *slog.Logger) error {
	if err := ValidatePrefix(prefix); err != nil {
		return err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	names, err := labNamespaces(prefix)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		logger.DebugContext(ctx, "lab down: nothing to remove", "prefix", prefix)
		return nil
	}
	if err := checkRoot(); err != nil {
		return err
	}
	start := time.Now()
	var errs []error
	if err := killProcesses(ctx, names, logger); err != nil {
		errs = append(errs, err)
	}
	r := runner{log: logger}
	for _, name := range names {
		if err := r.ip(ctx, "", "netns", "delete", name); err != nil {
			if _, statErr := os.Stat(nsPath(name)); errors.Is(statErr, fs.ErrNotExist) {
				continue // deleted by someone else meanwhile: fine
			}
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s down: %w", prefix, err)
	}
	logger.InfoContext(ctx, "lab down", "prefix", prefix, "namespaces", len(names), "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// nsName is a lab namespace name, parsed.
type nsName struct {
	name  string
	class int // classPod, classNode, classExternal or classFabric
	index int // node index; 0 for the fabric and the external host
}

// Namespace classes, in the order Down deletes them.
const (
	classPod      = 0
	classNode     = 1
	classExternal = 2
	classFabric   = 3
)

// labNamespaces returns the names in NetNSDir that belong to the lab prefix,
// pods first, then nodes, then the external host, then the fabric (the
// order to delete them in).
func labNamespaces(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetNSDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", NetNSDir, err)
	}
	var found []nsName
	for _, e := range entries {
		if n, ok := parseNSName(prefix, e.Name()); ok {
			found = append(found, n)
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].class != found[j].class {
			return found[i].class < found[j].class
		}
		return found[i].index < found[j].index
	})
	names := make([]string, len(found))
	for i, n := range found {
		names[i] = n.name
	}
	return names, nil
}

// parseNSName reports whether name is one of lab prefix's namespaces:
// "<prefix>-fabric", "<prefix>-ext", "<prefix>-node<N>" or "<prefix>-pod<N>".
func parseNSName(prefix, name string) (nsName, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return nsName{}, false
	}
	switch rest {
	case "fabric":
		return nsName{name: name, class: classFabric}, true
	case "ext":
		return nsName{name: name, class: classExternal}, true
	}
	for class, kind := range []string{classPod: "pod", classNode: "node"} {
		num, ok := strings.CutPrefix(rest, kind)
		if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil {
			return nsName{}, false
		}
		return nsName{name: name, class: class, index: i}, true
	}
	return nsName{}, false
}

// displayOrder sorts names (all from one lab) as the fabric, the external
// host, then node1, pod1, node2, pod2, ...
func displayOrder(names []string) []string {
	out := slices.Clone(names)
	key := func(name string) (int, int) {
		// The prefix is the same for all; parse with the part before "-".
		prefix, _, _ := strings.Cut(name, "-")
		n, _ := parseNSName(prefix, name)
		switch n.class {
		case classFabric:
			return -2, 0
		case classExternal:
			return -1, 0
		}
		return n.index, 1 - n.class // node (classNode) before pod (classPod)
	}
	sort.SliceStable(out, func(i, j int) bool {
		ai, ak := key(out[i])
		bi, bk := key(out[j])
		if ai != bi {
			return ai < bi
		}
		return ak < bk
	})
	return out
}

// nsIDs maps the identity of each named namespace to its name; entries that
// cannot be read (a half-created name) are skipped, and so is a name bound
// to the host's own namespace (that of PID 1 or of this process): its
// processes are the host's, and Down must never kill them.
func nsIDs(names []string) map[netns.ID]string {
	host := map[netns.ID]bool{}
	for _, p := range []string{"/proc/1/ns/net", "/proc/self/ns/net"} {
		if id, err := netns.IDOf(p); err == nil {
			host[id] = true
		}
	}
	ids := make(map[netns.ID]string, len(names))
	for _, name := range names {
		if id, err := netns.IDOf(nsPath(name)); err == nil && !host[id] {
			ids[id] = name
		}
	}
	return ids
}

// process is a process found in a lab namespace.
type process struct {
	pid     int
	ns      string
	command string
}

// processesIn lists the processes (not this one) whose network namespace is
// in ids. Processes that exit while being read are skipped; zombies have no
// namespace and are not listed.
func processesIn(ids map[netns.ID]string) ([]process, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	self := os.Getpid()
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		id, err := netns.IDOf("/proc/" + e.Name() + "/ns/net")
		if err != nil {
			continue
		}
		name, ok := ids[id]
		if !ok {
			continue
		}
		out = append(out, process{pid: pid, ns: name, command: cmdline(pid)})
	}
	return out, nil
}

// cmdline returns the command line of pid, arguments separated by spaces.
func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return "?"
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// killProcesses SIGKILLs every process in the named namespaces and waits,
// at most killTimeout, until none is left.
func killProcesses(ctx context.Context, names []string, logger *slog.Logger) error {
	ids := nsIDs(names)
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	ticker := time.NewTicker(killPoll)
	defer ticker.Stop()
	for {
		procs, err := processesIn(ids)
		if err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil
		}
		for _, p := range procs {
			logger.InfoContext(ctx, "killing process in lab namespace", "pid", p.pid, "netns", p.ns, "command", p.command)
			if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill %d (%s in %s): %w", p.pid, p.command, p.ns, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes still in lab namespaces (first: %d %s in %s): %w", procs[0].pid, procs[0].command, procs[0].ns, ctx.Err())
		case <-ticker.C:
		}
	}
}
