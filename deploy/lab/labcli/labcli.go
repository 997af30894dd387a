// Package labcli is the command line of the network-namespace lab: the
// `meshlab` root command with `up`, `down`, `status` and `fault`, on top of package
// lab. Further subcommands (such as a demo that runs meshperf on the lab)
// are passed to NewCommand, and can log through Logger.
package labcli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/deploy/lab"
)

// DefaultPrefix is the lab prefix the commands use when --prefix is not given.
const DefaultPrefix = "mp"

// logLevelFlag is the root's persistent flag read by Logger.
const logLevelFlag = "log-level"

// NewCommand returns the `meshlab` root command with the up, down and status
// subcommands, plus extra (added as they are). The root silences cobra's own
// error and usage printing on run errors: the caller prints the error
// Execute returns. It has a persistent --log-level flag (debug, info, warn,
// error; default info) that Logger honours.
func NewCommand(extra ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "meshlab",
		Short: "A Kubernetes-like lab of network namespaces for meshperf",
		Long: "meshlab builds, inspects and removes a lab of Linux network namespaces wired\n" +
			"like a Kubernetes cluster (flannel host-gw or vxlan, kube-proxy-style\n" +
			"ClusterIPs). It needs root. Nothing is created in the root namespace.",
		SilenceErrors: true,
		SilenceUsage:  true,
		// Runs before any subcommand that has no PersistentPreRunE of its own.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return checkLogLevel(cmd) },
	}
	root.PersistentFlags().String(logLevelFlag, "info", "log level on stderr: debug, info, warn or error")
	root.AddCommand(newUpCommand(), newDownCommand(), newStatusCommand(), newFaultCommand())
	root.AddCommand(extra...)
	return root
}

// Logger returns a text logger on cmd's stderr at the root's --log-level
// (info if the flag is absent or unparsable).
func Logger(cmd *cobra.Command) *slog.Logger {
	level := slog.LevelInfo
	if f := cmd.Root().PersistentFlags().Lookup(logLevelFlag); f != nil {
		_ = level.UnmarshalText([]byte(f.Value.String()))
	}
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
}

// checkLogLevel validates --log-level, so a typo is an error, not silence.
func checkLogLevel(cmd *cobra.Command) error {
	f := cmd.Root().PersistentFlags().Lookup(logLevelFlag)
	if f == nil {
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.Value.String())); err != nil {
		return fmt.Errorf("--%s %q: want debug, info, warn or error", logLevelFlag, f.Value.String())
	}
	return nil
}

func newUpCommand() *cobra.Command {
	var (
		cfg    lab.Config
		mode   string
		family string
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build a lab (removing any lab with the same prefix first) and print its layout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Mode = lab.Mode(mode)
			cfg.IPFamily = lab.Family(family)
			cfg.Logger = Logger(cmd)
			l, err := lab.Up(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return PrintLayout(cmd.OutOrStdout(), l)
		},
	}
	modes := make([]string, len(lab.Modes))
	for i, m := range lab.Modes {
		modes[i] = string(m)
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Prefix, "prefix", DefaultPrefix, "lab name: prefix of its network namespaces, [a-z0-9]")
	f.IntVar(&cfg.Nodes, "nodes", lab.DefaultNodes, fmt.Sprintf("number of nodes, %d to %d", lab.MinNodes, lab.MaxNodes))
	f.StringVar(&mode, "mode", string(lab.ModeHostGW), "cross-node pod network: "+strings.Join(modes, " or "))
	f.BoolVar(&cfg.DropCrossNodePod, "drop-cross-node-pod", false,
		"drop pod traffic to other nodes' pods in every node's FORWARD chain (a broken CNI)")
	f.StringVar(&family, "ip-family", string(lab.FamilyIPv4), "IP stack of hosts, pods and ClusterIPs: "+FamilyNames())
	return cmd
}

func newDownCommand() *cobra.Command {
	return labCommand("down", "Remove a lab: kill the processes in its namespaces and delete them (idempotent)",
		cobra.NoArgs, func(cmd *cobra.Command, _ []string, prefix string) error {
			return lab.Down(cmd.Context(), prefix, Logger(cmd))
		})
}

func newStatusCommand() *cobra.Command {
	return labCommand("status", "Print a lab's namespaces, interfaces, routes and processes",
		cobra.NoArgs, func(cmd *cobra.Command, _ []string, prefix string) error {
			st, err := lab.Status(cmd.Context(), prefix)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), st.String())
			return err
		})
}

// labCommand returns a subcommand that works on an existing lab: it has
// --prefix, the lab to act on, and run gets the flag's value.
func labCommand(use, short string, args cobra.PositionalArgs,
	run func(cmd *cobra.Command, args []string, prefix string) error) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE:  func(cmd *cobra.Command, args []string) error { return run(cmd, args, prefix) },
	}
	cmd.Flags().StringVar(&prefix, "prefix", DefaultPrefix, "lab name: prefix of its network namespaces")
	return cmd
}

// FamilyNames lists lab.Families as "ipv4, ipv6 or dual", for flag help.
func FamilyNames() string {
	names := make([]string, len(lab.Families))
	for i, f := range lab.Families {
		names[i] = string(f)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// PrintLayout writes l as a table, one row per node: node name, host IP, pod
// IP, pod netns path, service IP, host netns path; then the external host,
// the mode and how to run a command in a namespace.
func PrintLayout(w io.Writer, l *lab.Lab) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOST IP\tPOD IP\tPOD NETNS\tSERVICE IP\tHOST NETNS")
	for _, n := range l.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.HostIP, n.PodIP, n.PodNetNSPath, n.ServiceIP, n.HostNetNSPath)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.IPFamily == lab.FamilyDual {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tHOST IPV6\tPOD IPV6\tSERVICE IPV6")
		for _, n := range l.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, n.HostIPv6, n.PodIPv6, n.ServiceIPv6)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	drop := ""
	if l.DropCrossNodePod {
		drop = ", cross-node pod traffic DROPPED"
	}
	ext := l.External
	if _, err := fmt.Fprintf(w, "EXTERNAL %s in %s (outside the cluster: pods reach it masqueraded to their node IP)\n",
		ext.IP, ext.NetNSPath); err != nil {
		return err
	}
	cp := l.ControlPlane()
	fam := ""
	if l.IPFamily != lab.FamilyIPv4 {
		fam = ", " + string(l.IPFamily)
	}
	_, err := fmt.Fprintf(w, "\nlab %q: %d nodes, mode %s%s%s; control plane %s.\nRun a command in a namespace: %s\nRemove it: meshlab down --prefix %s\n",
		l.Prefix, len(l.Nodes), l.Mode, fam, drop, cp.Name, strings.Join(cp.PodCommand("ping", "-c", "3", l.Nodes[len(l.Nodes)-1].PodIP.String()), " "), l.Prefix)
	return err
}
