package labcli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/deploy/lab"
)

// newFaultCommand is `meshlab fault add|clear|list`.
func newFaultCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fault",
		Short: "Inject, clear and list faults on one node of a lab (pod-drop, mtu-blackhole, rate-limit, icmp-drop)",
		Long: `Faults break or slow every path to and from one node, as operators meet them:
  pod-drop       cross-node pod traffic to and from the node is dropped (a broken CNI)
  mtu-blackhole  cross-node pod packets over --mtu bytes vanish, small ones pass
                 (a VXLAN MTU black hole: no ICMP "fragmentation needed")
  rate-limit     everything the node sends and receives is shaped to --rate (tc tbf)
  icmp-drop      ICMP echo to, from and through the node is dropped; TCP works
A fault lasts until "meshlab fault clear" or "meshlab down".`,
	}
	cmd.AddCommand(newFaultAddCommand(), newFaultClearCommand(), newFaultListCommand())
	return cmd
}

func newFaultAddCommand() *cobra.Command {
	var (
		rate string
		f    lab.Fault
	)
	cmd := labCommand("add KIND NODE", "Inject a fault into a node, e.g. meshlab fault add mtu-blackhole node-2",
		cobra.ExactArgs(2), func(cmd *cobra.Command, args []string, prefix string) error {
			f.Kind, f.Node = lab.FaultKind(args[0]), args[1]
			// A parameter of another kind would be silently ignored.
			for _, p := range []struct {
				flag string
				kind lab.FaultKind
			}{{"mtu", lab.FaultMTUBlackhole}, {"rate", lab.FaultRateLimit}} {
				if cmd.Flags().Changed(p.flag) && f.Kind != p.kind && slices.Contains(lab.FaultKinds, f.Kind) {
					return fmt.Errorf("--%s %q: only %s takes it, not %s", p.flag, cmd.Flags().Lookup(p.flag).Value, p.kind, f.Kind)
				}
			}
			if rate != "" {
				bps, err := ParseRate(rate)
				if err != nil {
					return err
				}
				f.RateBPS = bps
			}
			l, err := lab.Find(cmd.Context(), prefix, Logger(cmd))
			if err != nil {
				return err
			}
			if err := lab.Inject(cmd.Context(), l, f); err != nil {
				return err
			}
			faults, err := lab.Faults(cmd.Context(), l)
			if err != nil {
				return err
			}
			for _, have := range faults {
				if have.Node == f.Node && have.Kind == f.Kind {
					fmt.Fprintln(cmd.OutOrStdout(), "injected:", have)
				}
			}
			return nil
		})
	fl := cmd.Flags()
	fl.IntVar(&f.MTUBytes, "mtu", 0, fmt.Sprintf("mtu-blackhole: largest packet that passes, bytes (%d..%d; default %d)",
		lab.MinFaultMTU, lab.MaxFaultMTU, lab.DefaultFaultMTU))
	fl.StringVar(&rate, "rate", "", "rate-limit: rate with a unit, e.g. 100Mbit, 1Gbit, 500kbit (default 100Mbit)")
	return cmd
}

func newFaultClearCommand() *cobra.Command {
	return labCommand("clear [KIND [NODE]]", "Remove faults: all of them, all of one kind, or one kind on one node (idempotent)",
		cobra.MaximumNArgs(2), func(cmd *cobra.Command, args []string, prefix string) error {
			var kind lab.FaultKind
			var node string
			if len(args) > 0 {
				kind = lab.FaultKind(args[0])
			}
			if len(args) > 1 {
				node = args[1]
			}
			l, err := lab.Find(cmd.Context(), prefix, Logger(cmd))
			if errors.Is(err, lab.ErrNoLab) { // a removed lab has no faults left
				fmt.Fprintf(cmd.OutOrStdout(), "no lab %q: no fault to clear\n", prefix)
				return nil
			}
			if err != nil {
				return err
			}
			cleared, err := lab.Clear(cmd.Context(), l, node, kind)
			for _, f := range cleared {
				fmt.Fprintln(cmd.OutOrStdout(), "cleared:", f)
			}
			if err == nil && len(cleared) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no fault to clear")
			}
			return err
		})
}

func newFaultListCommand() *cobra.Command {
	return labCommand("list", "List the faults injected into a lab's nodes",
		cobra.NoArgs, func(cmd *cobra.Command, _ []string, prefix string) error {
			l, err := lab.Find(cmd.Context(), prefix, Logger(cmd))
			if err != nil {
				return err
			}
			faults, err := lab.Faults(cmd.Context(), l)
			if err != nil {
				return err
			}
			if len(faults) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no fault")
			}
			for _, f := range faults {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			return nil
		})
}

// ParseRate reads a rate as tc writes it, a number and a unit of bits per
// second with decimal prefixes ("bit", "kbit", "mbit", "gbit", any case),
// e.g. "100Mbit" -> 100,000,000. The error names the value.
func ParseRate(s string) (uint64, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(0)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"gbit", 1_000_000_000}, {"mbit", 1_000_000}, {"kbit", 1_000}, {"bit", 1}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	x, err := strconv.ParseFloat(v, 64)
	bps := x * float64(mult)
	// !(bps >= 1) also refuses NaN, and rates under 1 bit/s that would
	// truncate to 0, which Fault reads as the default rate.
	if mult == 0 || err != nil || !(bps >= 1) || bps > float64(lab.MaxFaultRateBPS) {
		return 0, fmt.Errorf("--rate %q: want a positive number and a unit (bit, kbit, mbit, gbit), e.g. 100Mbit, at most 100Gbit", s)
	}
	return uint64(bps), nil
}
