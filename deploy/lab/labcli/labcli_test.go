package labcli

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil/labtest"
)

// execute runs the meshlab command line args and returns stdout, stderr and
// the error.
func execute(t *testing.T, args []string, extra ...*cobra.Command) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := NewCommand(extra...)
	var stdout, stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error  // nil: any error
		wantMsg string // in the error
	}{
		{"bad mode", []string{"up", "--prefix", "lcx", "--mode", "ipip"}, lab.ErrInvalidConfig, `Mode "ipip"`},
		{"bad nodes", []string{"up", "--prefix", "lcx", "--nodes", "1"}, lab.ErrInvalidConfig, "Nodes 1"},
		{"bad prefix up", []string{"up", "--prefix", "Bad-1"}, lab.ErrInvalidConfig, `Prefix "Bad-1"`},
		{"bad prefix down", []string{"down", "--prefix", "x/y"}, lab.ErrInvalidConfig, `Prefix "x/y"`},
		{"bad prefix status", []string{"status", "--prefix", ""}, lab.ErrInvalidConfig, `Prefix ""`},
		{"bad log level", []string{"--log-level", "loud", "status"}, nil, "--log-level"},
		{"extra argument", []string{"down", "now"}, nil, "unknown command"},
		{"unknown flag", []string{"up", "--pods", "3"}, nil, "unknown flag"},
		{"fault --mtu on pod-drop", []string{"fault", "add", "pod-drop", "node-2", "--prefix", "lcx", "--mtu", "1"}, nil, `--mtu "1": only mtu-blackhole`},
		{"fault --rate on icmp-drop", []string{"fault", "add", "icmp-drop", "node-2", "--prefix", "lcx", "--rate", "5Mbit"}, nil, `--rate "5Mbit": only rate-limit`},
		{"fault --mtu on rate-limit", []string{"fault", "add", "rate-limit", "node-2", "--prefix", "lcx", "--mtu", "1400"}, nil, `--mtu "1400": only mtu-blackhole`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := execute(t, tt.args)
			if err == nil {
				t.Fatalf("%v: want an error", tt.args)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("%v: error %v, want %v", tt.args, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("%v: error %q does not mention %q", tt.args, err, tt.wantMsg)
			}
		})
	}
}

func TestExtraCommand(t *testing.T) {
	ran := false
	demo := &cobra.Command{
		Use: "demo",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ran = true
			Logger(cmd).Debug("hello from demo")
			return nil
		},
	}
	_, stderr, err := execute(t, []string{"--log-level", "debug", "demo"}, demo)
	if err != nil || !ran {
		t.Fatalf("demo: ran %v, err %v", ran, err)
	}
	if !strings.Contains(stderr, "hello from demo") {
		t.Errorf("debug log missing from stderr: %q", stderr)
	}
	var names []string
	for _, c := range NewCommand(demo).Commands() {
		names = append(names, c.Name())
	}
	for _, want := range []string{"up", "down", "status", "demo"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("subcommands %v lack %s", names, want)
		}
	}
}

func TestPrintLayout(t *testing.T) {
	l, err := lab.Describe(lab.Config{Prefix: "mp", Mode: lab.ModeVXLAN, DropCrossNodePod: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := PrintLayout(&b, l); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"NODE", "HOST IP", "POD IP", "POD NETNS", "SERVICE IP",
		"node-2  172.18.0.12  10.244.2.2  /run/netns/mp-pod2  10.96.0.12",
		"mode vxlan", "DROPPED", "nsenter --net=/run/netns/mp-pod1 -- ping",
		"EXTERNAL 172.18.0.250 in /run/netns/mp-ext",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("layout lacks %q:\n%s", want, got)
		}
	}
}

// TestUpStatusDown drives a real lab through the command line (root only).
func TestUpStatusDown(t *testing.T) {
	testskip.Root(t, "the lab creates network namespaces")
	testskip.Tools(t, "", "iptables-restore")
	prefix := labtest.Prefix("lc")
	labtest.DownOnCleanup(t, prefix)
	steps := []struct {
		args    []string
		wantOut []string
	}{
		{[]string{"up", "--prefix", prefix, "--nodes", "2", "--mode", "vxlan"}, []string{"node-2", "/run/netns/" + prefix + "-pod2", "10.96.0.12", "/run/netns/" + prefix + "-ext"}},
		{[]string{"status", "--prefix", prefix}, []string{"6 namespaces", "flannel.1", "10.244.2.0/32", prefix + "-ext", "172.18.0.250/24"}},
		{[]string{"down", "--prefix", prefix}, nil},
		{[]string{"down", "--prefix", prefix}, nil},
		{[]string{"status", "--prefix", prefix}, []string{"no namespaces"}},
	}
	for _, s := range steps {
		stdout, stderr, err := execute(t, s.args)
		if err != nil {
			t.Fatalf("meshlab %v: %v\n%s", s.args, err, stderr)
		}
		for _, want := range s.wantOut {
			if !strings.Contains(stdout, want) {
				t.Errorf("meshlab %v: output lacks %q:\n%s", s.args, want, stdout)
			}
		}
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"100Mbit", 100_000_000, false},
		{"1gbit", 1_000_000_000, false},
		{"1.5Gbit", 1_500_000_000, false},
		{"500kbit", 500_000, false},
		{"2000000bit", 2_000_000, false},
		{" 10MBIT ", 10_000_000, false},
		{"100", 0, true},
		{"100Mbps", 0, true},
		{"Mbit", 0, true},
		{"-5Mbit", 0, true},
		{"0mbit", 0, true},
		{"101Gbit", 0, true},
		{"", 0, true},
		{"NaNbit", 0, true},
		{"nanmbit", 0, true},
		{"0.5bit", 0, true},
		{"1e-10gbit", 0, true},
		{"1e3Mbit", 1_000_000_000, false},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
			t.Errorf("ParseRate(%q): error %q does not name the value", tt.in, err)
		}
	}
}

func TestFaultWithoutLab(t *testing.T) {
	prefix := "lcxnolab"
	tests := []struct {
		name    string
		args    []string
		wantOut string // on success
		wantErr string // "" for success
	}{
		{"clear is idempotent after down", []string{"fault", "clear", "--prefix", prefix}, `no lab "lcxnolab": no fault to clear`, ""},
		{"list says there is no lab", []string{"fault", "list", "--prefix", prefix}, "", `no lab "lcxnolab"`},
		{"add says there is no lab", []string{"fault", "add", "pod-drop", "node-1", "--prefix", prefix}, "", `no lab "lcxnolab"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := execute(t, tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("%v: %v", tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("%v: error %v, want one containing %q", tt.args, err, tt.wantErr)
			case !strings.Contains(stdout, tt.wantOut):
				t.Errorf("%v: output %q lacks %q", tt.args, stdout, tt.wantOut)
			}
		})
	}
}
