package lab

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// CommandTimeout bounds every external command the lab runs. iptables waits
// at most iptablesWait for the xtables lock, well within it.
const CommandTimeout = 15 * time.Second

const (
	iptablesWait = "5" // seconds, for iptables -w
	waitDelay    = 2 * time.Second
)

// tools are the programs Up and Down need, checked before anything is
// built; faultTools those Inject and Clear need. Both come from tools.txt,
// the list install-deps.sh installs.
var (
	tools      = toolsFor("lab")
	faultTools = toolsFor("fault")
)

// runner runs commands for one lab operation.
type runner struct {
	log *slog.Logger
}

// run runs argv with stdin (may be empty) and CommandTimeout, and returns its
// stdout. A non-zero exit is an error carrying argv and stderr.
func (r runner) run(ctx context.Context, stdin string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r.log.DebugContext(ctx, "lab command", "argv", argv, "elapsed", time.Since(start), "err", err)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		if msg != "" {
			return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
		}
		return stdout.String(), fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return stdout.String(), nil
}

// ip runs "ip -n ns args..." (ns "" means the caller's namespace, used only
// for `ip netns`).
func (r runner) ip(ctx context.Context, ns string, args ...string) error {
	argv := []string{"ip"}
	if ns != "" {
		argv = append(argv, "-n", ns)
	}
	_, err := r.run(ctx, "", append(argv, args...)...)
	return err
}

// checkRoot fails unless the process runs as root, which creating network
// namespaces needs.
func checkRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the lab needs root (uid 0), running as uid %d", ErrUnsupported, os.Geteuid())
	}
	return nil
}
