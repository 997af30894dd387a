package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/meshperf/meshperf/internal/stringers"
)

// LabStatus is what exists of a lab: its namespaces as found in NetNSDir,
// with their interfaces, routes and processes. It is a snapshot; print it
// with String.
type LabStatus struct { //nolint:revive // exported: lab.Status is the function that returns it
	// Prefix is the lab's prefix.
	Prefix string
	// Namespaces are the lab's namespaces: the fabric, the external host,
	// then node1, pod1, node2, pod2, and so on.
	// Empty means no lab exists under Prefix.
	Namespaces []NamespaceStatus
}

// NamespaceStatus is one network namespace of a lab.
type NamespaceStatus struct {
	// Name is the namespace name, Path its NetNSDir path.
	Name, Path string
	// Interfaces are its links in ifindex order.
	Interfaces []InterfaceStatus
	// Routes are the lines of `ip route show` (main table), as printed.
	Routes []string
	// Processes are the processes whose network namespace this is.
	Processes []ProcessStatus
	// Err says why interfaces or routes could not be read ("" if they were),
	// e.g. for a name left by a crash that no longer holds a namespace.
	Err string
}

// InterfaceStatus is one link of a namespace.
type InterfaceStatus struct {
	// Name is the interface name, e.g. "eth0".
	Name string
	// State is the operational state as the kernel reports it: "UP",
	// "DOWN", "UNKNOWN" (loopback, vxlan), ...
	State string
	// MTU is in bytes.
	MTU int
	// MAC is the link-layer address, "" if none.
	MAC string
	// Addrs are the IPv4 and IPv6 addresses with their prefix lengths.
	Addrs []netip.Prefix
}

// ProcessStatus is a process running in a lab namespace.
type ProcessStatus struct {
	// PID is the process ID in the caller's PID namespace.
	PID int
	// Command is its command line, arguments separated by spaces.
	Command string
}

// Empty reports whether no namespace of the lab exists.
func (s *LabStatus) Empty() bool { return len(s.Namespaces) == 0 }

// Processes returns every process in every namespace of the lab.
func (s *LabStatus) Processes() []ProcessStatus {
	var out []ProcessStatus
	for _, ns := range s.Namespaces {
		out = append(out, ns.Processes...)
	}
	return out
}

// Namespace returns the status of the namespace called name, and whether
// it exists.
func (s *LabStatus) Namespace(name string) (NamespaceStatus, bool) {
	for _, ns := range s.Namespaces {
		if ns.Name == name {
			return ns, true
		}
	}
	return NamespaceStatus{}, false
}

// String renders the status as indented text, one block per namespace.
func (s *LabStatus) String() string {
	var sb strings.Builder
	if s.Empty() {
		fmt.Fprintf(&sb, "lab %q: no namespaces\n", s.Prefix)
		return sb.String()
	}
	fmt.Fprintf(&sb, "lab %q: %d namespaces, %d processes\n", s.Prefix, len(s.Namespaces), len(s.Processes()))
	for _, ns := range s.Namespaces {
		fmt.Fprintf(&sb, "\n%s (%s)\n", ns.Name, ns.Path)
		if ns.Err != "" {
			fmt.Fprintf(&sb, "  error: %s\n", ns.Err)
		}
		var table strings.Builder
		tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
		for _, i := range ns.Interfaces {
			fmt.Fprintf(tw, "  %s\t%s\tmtu %d\t%s\t%s\n", i.Name, i.State, i.MTU, i.MAC, stringers.Join(i.Addrs, " ", ""))
		}
		_ = tw.Flush()
		for _, line := range strings.SplitAfter(table.String(), "\n") {
			if t := strings.TrimRight(line, " \n"); t != "" {
				sb.WriteString(t + "\n")
			}
		}
		for _, r := range ns.Routes {
			fmt.Fprintf(&sb, "  route: %s\n", r)
		}
		for _, p := range ns.Processes {
			fmt.Fprintf(&sb, "  process: %d %s\n", p.PID, p.Command)
		}
	}
	return sb.String()
}

// Status reports what exists of the lab named prefix, without changing
// anything. A lab that does not exist gives an empty LabStatus, not an error.
// Errors: ErrInvalidConfig for a bad prefix, or failing to read NetNSDir or
// /proc. A namespace whose interfaces cannot be read is reported with Err
// set. Reading interfaces needs root.
func Status(ctx context.Context, prefix string) (*LabStatus, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	names, err := labNamespaces(prefix)
	if err != nil {
		return nil, err
	}
	names = displayOrder(names)
	st := &LabStatus{Prefix: prefix}
	procs, err := processesIn(nsIDs(names))
	if err != nil {
		return nil, err
	}
	r := runner{log: slog.New(slog.DiscardHandler)}
	for _, name := range names {
		ns := NamespaceStatus{Name: name, Path: nsPath(name)}
		var errs []string
		if ifs, err := interfaces(ctx, r, name); err != nil {
			errs = append(errs, err.Error())
		} else {
			ns.Interfaces = ifs
		}
		if out, err := r.run(ctx, "", "ip", "-n", name, "route", "show"); err != nil {
			errs = append(errs, err.Error())
		} else {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					ns.Routes = append(ns.Routes, line)
				}
			}
		}
		ns.Err = strings.Join(errs, "; ")
		for _, p := range procs {
			if p.ns == name {
				ns.Processes = append(ns.Processes, ProcessStatus{PID: p.pid, Command: p.command})
			}
		}
		st.Namespaces = append(st.Namespaces, ns)
	}
	return st, nil
}

// interfaces reads the links of namespace name with `ip -j addr show`.
func interfaces(ctx context.Context, r runner, name string) ([]InterfaceStatus, error) {
	out, err := r.run(ctx, "", "ip", "-n", name, "-j", "addr", "show")
	if err != nil {
		return nil, err
	}
	return parseIPAddrJSON([]byte(out))
}

// ipLink is the part of `ip -j addr show` output that Status reads.
type ipLink struct {
	IfName    string `json:"ifname"`
	OperState string `json:"operstate"`
	MTU       int    `json:"mtu"`
	Address   string `json:"address"`
	AddrInfo  []struct {
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// parseIPAddrJSON parses `ip -j addr show` output.
func parseIPAddrJSON(b []byte) ([]InterfaceStatus, error) {
	var links []ipLink
	if err := json.Unmarshal(b, &links); err != nil {
		return nil, fmt.Errorf("parse ip -j addr output: %w", err)
	}
	out := make([]InterfaceStatus, 0, len(links))
	for _, l := range links {
		i := InterfaceStatus{Name: l.IfName, State: l.OperState, MTU: l.MTU, MAC: l.Address}
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil {
				return nil, fmt.Errorf("parse ip -j addr output: interface %s: address %q: %w", l.IfName, a.Local, err)
			}
			p := netip.PrefixFrom(addr, a.PrefixLen)
			if !p.IsValid() {
				return nil, fmt.Errorf("parse ip -j addr output: interface %s: prefix length %d of %s", l.IfName, a.PrefixLen, addr)
			}
			i.Addrs = append(i.Addrs, p)
		}
		out = append(out, i)
	}
	return out, nil
}
